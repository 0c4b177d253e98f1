# @expect: correct
# @design: One fused kernel in which each thread computes a contiguous chunk of 64 elements.
# @analysis: Neighbouring threads read addresses 256 bytes apart, so every warp load and store touches 32 cache lines instead of 4; the uncoalesced traffic makes this several times slower than a coalesced kernel and no faster than eager.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <cstdio>

__global__ void softsign_chunk_kernel(const float* __restrict__ x, float* __restrict__ y, long long n) {
    const long long chunk = 64;
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long start = t * chunk;
    long long end = start + chunk < n ? start + chunk : n;
    for (long long i = start; i < end; ++i) {
        float v = x[i];
        y[i] = v / (1.0f + fabsf(v));
    }
}

void softsign_launch(const float* x, float* y, long long n) {
    const int block = 256;
    long long threads = (n + 63) / 64;
    long long grid = (threads + block - 1) / block;
    softsign_chunk_kernel<<<(unsigned int)grid, block>>>(x, y, n);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) printf("softsign_uncoalesced: %s\n", cudaGetErrorString(e));
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

ext = load_inline(name="softsign_uncoalesced", cpp_sources=cpp_src, cuda_sources=cuda_src,
                  functions=["softsign_forward"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.softsign_forward(x)
