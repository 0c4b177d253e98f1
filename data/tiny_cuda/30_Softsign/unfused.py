# @expect: correct
# @design: Two kernels: the first writes 1 + |x| to a temporary, the second divides x by it.
# @analysis: Merging abs and add saves one of eager's three kernels, but the temporary still costs an extra write and two extra reads, so five memory passes remain against eager's seven.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <cstdio>

__global__ void abs_add_one_kernel(const float* __restrict__ x, float* __restrict__ d, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) d[i] = 1.0f + fabsf(x[i]);
}

__global__ void div_kernel(const float* __restrict__ x, const float* __restrict__ d, float* __restrict__ y, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] / d[i];
}

void softsign_launch(const float* x, float* d, float* y, long long n) {
    const int block = 256;
    long long grid = (n + block - 1) / block;
    abs_add_one_kernel<<<(unsigned int)grid, block>>>(x, d, n);
    div_kernel<<<(unsigned int)grid, block>>>(x, d, y, n);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) printf("softsign_unfused: %s\n", cudaGetErrorString(e));
}
"""

cpp_src = r"""
void softsign_launch(const float* x, float* d, float* y, long long n);

torch::Tensor softsign_forward(torch::Tensor x) {
    auto xc = x.contiguous();
    auto d = torch::empty_like(xc);
    auto y = torch::empty_like(xc);
    softsign_launch(xc.data_ptr<float>(), d.data_ptr<float>(), y.data_ptr<float>(), xc.numel());
    return y;
}
"""

ext = load_inline(name="softsign_unfused", cpp_sources=cpp_src, cuda_sources=cuda_src,
                  functions=["softsign_forward"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.softsign_forward(x)
