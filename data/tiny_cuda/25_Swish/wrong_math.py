# @expect: wrong
# @design: One fused kernel, one element per thread, 256 threads per block, computing the sigmoid in registers.
# @analysis: Eager Swish runs a sigmoid kernel and a multiply kernel; computing everything in one pass halves the kernel count and cuts memory traffic by more than half.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <cstdio>

__global__ void swish_kernel(const float* __restrict__ x, float* __restrict__ y, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        y[i] = 1.0f / (1.0f + expf(-v));
    }
}

void swish_launch(const float* x, float* y, long long n) {
    const int block = 256;
    long long grid = (n + block - 1) / block;
    swish_kernel<<<(unsigned int)grid, block>>>(x, y, n);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) printf("swish_wrong_math: %s\n", cudaGetErrorString(e));
}
"""

cpp_src = r"""
void swish_launch(const float* x, float* y, long long n);

torch::Tensor swish_forward(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    swish_launch(xc.data_ptr<float>(), y.data_ptr<float>(), xc.numel());
    return y;
}
"""

ext = load_inline(name="swish_wrong_math", cpp_sources=cpp_src, cuda_sources=cuda_src,
                  functions=["swish_forward"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.swish_forward(x)
