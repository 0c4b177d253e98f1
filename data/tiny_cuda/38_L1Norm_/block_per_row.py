# @expect: correct
# @design: One fused kernel, one block of 256 threads per row: strided loop summing |x|, shared-memory tree reduction, then the same block divides its row by the mean.
# @analysis: One kernel replaces eager's three, removes the |x| temporary and the index division; x is read twice and y written once, with part of the second read served by L2.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <cstdio>

__global__ void l1_block_kernel(const float* __restrict__ x, float* __restrict__ y, long long D) {
    __shared__ float sh[256];
    const float* xr = x + blockIdx.x * D;
    float* yr = y + blockIdx.x * D;
    float s = 0.0f;
    for (long long j = threadIdx.x; j < D; j += 256) s += fabsf(xr[j]);
    sh[threadIdx.x] = s;
    __syncthreads();
    for (int k = 128; k > 0; k /= 2) {
        if (threadIdx.x < k) sh[threadIdx.x] += sh[threadIdx.x + k];
        __syncthreads();
    }
    float m = sh[0] / (float)D;
    for (long long j = threadIdx.x; j < D; j += 256) yr[j] = xr[j] / m;
}

void l1_launch(const float* x, float* y, long long rows, long long D) {
    l1_block_kernel<<<(unsigned int)rows, 256>>>(x, y, D);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) printf("l1norm_block_per_row: %s\n", cudaGetErrorString(e));
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

ext = load_inline(name="l1norm_block_per_row", cpp_sources=cpp_src, cuda_sources=cuda_src,
                  functions=["l1_forward"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.l1_forward(x)
