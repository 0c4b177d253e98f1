# @expect: correct
# @design: One fused kernel, one thread per row: the thread sums |x| over its row, then divides the row by the mean.
# @analysis: Only 32768 threads run (about 8 warps per SM) and neighbouring threads walk rows 256 KiB apart, so every warp access touches 32 cache lines; it is several times slower than eager.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <cstdio>

__global__ void l1_thread_row_kernel(const float* __restrict__ x, float* __restrict__ y, long long rows, long long D) {
    long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* xr = x + r * D;
    float* yr = y + r * D;
    float s = 0.0f;
    for (long long j = 0; j < D; ++j) s += fabsf(xr[j]);
    float m = s / (float)D;
    for (long long j = 0; j < D; ++j) yr[j] = xr[j] / m;
}

void l1_launch(const float* x, float* y, long long rows, long long D) {
    const int block = 256;
    long long grid = (rows + block - 1) / block;
    l1_thread_row_kernel<<<(unsigned int)grid, block>>>(x, y, rows, D);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) printf("l1norm_thread_per_row: %s\n", cudaGetErrorString(e));
}
"""

cpp_src = r"""
void l1_launch(const float* x, float* y, long long rows, long long D);

torch::Tensor l1_forward(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    l1_launch(xc.data_ptr<float>(), y.data_ptr<float>(), xc.size(0), xc.size(1));
    return y;
}
"""

ext = load_inline(name="l1norm_thread_per_row", cpp_sources=cpp_src, cuda_sources=cuda_src,
                  functions=["l1_forward"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.l1_forward(x)
