# @expect: correct
# @design: One fused persistent kernel, one 1024-thread block per SM looping over rows: unrolled strided sum of |x|, warp-shuffle reduction, then the block multiplies its row by 1/mean.
# @analysis: With only one 256 KiB row in flight per SM the working set fits in L2, so the second read of the row mostly hits L2 and DRAM traffic approaches one read plus one write, below the fused 256-thread kernel and well below eager's five passes.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <cstdio>

__global__ void __launch_bounds__(1024) l1_persistent_kernel(const float* __restrict__ x, float* __restrict__ y, long long rows, long long D) {
    __shared__ float warp_sums[32];
    __shared__ float inv_sh;
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
        const float* xr = x + r * D;
        float* yr = y + r * D;
        float s = 0.0f;
        #pragma unroll 8
        for (long long j = threadIdx.x; j < D; j += 1024) s += fabsf(xr[j]);
        for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffff, s, o);
        if (lane == 0) warp_sums[warp] = s;
        __syncthreads();
        if (warp == 0) {
            float t = warp_sums[lane];
            for (int o = 16; o > 0; o /= 2) t += __shfl_xor_sync(0xffffffff, t, o);
            if (lane == 0) inv_sh = (float)D / t;
        }
        __syncthreads();
        float inv = inv_sh;
        #pragma unroll 8
        for (long long j = threadIdx.x; j < D; j += 1024) yr[j] = xr[j] * inv;
        __syncthreads();
    }
}

void l1_launch(const float* x, float* y, long long rows, long long D) {
    int dev = 0, sms = 132;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    long long grid = rows < sms ? rows : sms;
    if (grid < 1) grid = 1;
    l1_persistent_kernel<<<(unsigned int)grid, 1024>>>(x, y, rows, D);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) printf("l1norm_block_per_row_1024: %s\n", cudaGetErrorString(e));
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

ext = load_inline(name="l1norm_block_per_row_1024", cpp_sources=cpp_src, cuda_sources=cuda_src,
                  functions=["l1_forward"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.l1_forward(x)
