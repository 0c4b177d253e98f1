# @expect: wrong
# @design: Two kernels: one block of 256 threads per row reduces |x| in shared memory and writes the row mean, then an elementwise kernel divides each element by its row's mean.
# @analysis: Against eager's abs, mean and divide (five passes) this reads x twice and writes y once, and the reduction kernel keeps the row sum in shared memory.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <cstdio>

__global__ void l1_mean_kernel(const float* __restrict__ x, float* __restrict__ mean, long long D) {
    __shared__ float sh[256];
    const float* xr = x + blockIdx.x * D;
    float s = 0.0f;
    for (long long j = threadIdx.x; j < D; j += 256) s += fabsf(xr[j]);
    sh[threadIdx.x] = s;
    __syncthreads();
    for (int k = 128; k > 0; k /= 2) {
        if (threadIdx.x < k) sh[threadIdx.x] += sh[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) mean[blockIdx.x] = sh[0] / (float)D;
}

__global__ void l1_div_kernel(const float* __restrict__ x, const float* __restrict__ mean, float* __restrict__ y, long long n, long long D) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] / mean[i / D];
}

void l1_launch(const float* x, float* mean, float* y, long long rows, long long D) {
    l1_mean_kernel<<<(unsigned int)rows, 256>>>(x, mean, D);
    long long n = rows * D;
    long long grid = (rows + 255) / 256;
    l1_div_kernel<<<(unsigned int)grid, 256>>>(x, mean, y, n, D);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) printf("l1norm_wrong_bounds: %s\n", cudaGetErrorString(e));
}
"""

cpp_src = r"""
void l1_launch(const float* x, float* mean, float* y, long long rows, long long D);

torch::Tensor l1_forward(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    auto mean = torch::empty({xc.size(0)}, xc.options());
    l1_launch(xc.data_ptr<float>(), mean.data_ptr<float>(), y.data_ptr<float>(), xc.size(0), xc.size(1));
    return y;
}
"""

ext = load_inline(name="l1norm_wrong_bounds", cpp_sources=cpp_src, cuda_sources=cuda_src,
                  functions=["l1_forward"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.l1_forward(x)
