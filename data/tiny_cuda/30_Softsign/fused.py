# @expect: correct
# @design: One fused kernel, one element per thread, 256 threads per block.
# @analysis: Eager Softsign runs three kernels (abs, add, divide) and moves x-sized tensors through memory seven times; one fused coalesced pass reads x once and writes y once, about 3x faster.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <cstdio>

__global__ void softsign_kernel(const float* __restrict__ x, float* __restrict__ y, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        y[i] = v / (1.0f + fabsf(v));
    }
}

void softsign_launch(const float* x, float* y, long long n) {
    const int block = 256;
    long long grid = (n + block - 1) / block;
    softsign_kernel<<<(unsigned int)grid, block>>>(x, y, n);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) printf("softsign_fused: %s\n", cudaGetErrorString(e));
}
"""

cpp_src = r"""
void softsign_launch(const float* x, float* y, long long n);

torch::Tensor softsign_forward(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    softsign_launch(xc.data_ptr<float>(), y.data_ptr<float>(), xc.numel());
    return y;
}
"""

ext = load_inline(name="softsign_fused", cpp_sources=cpp_src, cuda_sources=cuda_src,
                  functions=["softsign_forward"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.softsign_forward(x)
