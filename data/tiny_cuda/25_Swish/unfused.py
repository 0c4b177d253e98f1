# @expect: correct
# @design: Two kernels like eager PyTorch: the first writes sigmoid(x) to a temporary, the second multiplies it by x.
# @analysis: The temporary costs a full extra write and two extra reads of a tensor as large as x, so the five memory passes run at about eager speed.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <cstdio>

__global__ void sigmoid_kernel(const float* __restrict__ x, float* __restrict__ s, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) s[i] = 1.0f / (1.0f + expf(-x[i]));
}

__global__ void mul_kernel(const float* __restrict__ x, const float* __restrict__ s, float* __restrict__ y, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * s[i];
}

void swish_launch(const float* x, float* s, float* y, long long n) {
    const int block = 256;
    long long grid = (n + block - 1) / block;
    sigmoid_kernel<<<(unsigned int)grid, block>>>(x, s, n);
    mul_kernel<<<(unsigned int)grid, block>>>(x, s, y, n);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) printf("swish_unfused: %s\n", cudaGetErrorString(e));
}
"""

cpp_src = r"""
void swish_launch(const float* x, float* s, float* y, long long n);

torch::Tensor swish_forward(torch::Tensor x) {
    auto xc = x.contiguous();
    auto s = torch::empty_like(xc);
    auto y = torch::empty_like(xc);
    swish_launch(xc.data_ptr<float>(), s.data_ptr<float>(), y.data_ptr<float>(), xc.numel());
    return y;
}
"""

ext = load_inline(name="swish_unfused", cpp_sources=cpp_src, cuda_sources=cuda_src,
                  functions=["swish_forward"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.swish_forward(x)
