# @expect: correct
# @design: One fused kernel, one float4 per thread per step, grid-stride loop over a capped grid, scalar loop for the tail.
# @analysis: Like the scalar fused kernel it reads x once and writes y once, but 16-byte loads and stores need a quarter of the memory instructions and keep more bytes in flight, so it sits closest to the bandwidth limit.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <cstdio>

__device__ __forceinline__ float swish1(float v) { return v / (1.0f + expf(-v)); }

__global__ void swish_vec4_kernel(const float* __restrict__ x, float* __restrict__ y, long long n, long long n4) {
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long stride = (long long)gridDim.x * blockDim.x;
    const float4* x4 = reinterpret_cast<const float4*>(x);
    float4* y4 = reinterpret_cast<float4*>(y);
    for (long long i = t; i < n4; i += stride) {
        float4 v = x4[i];
        v.x = swish1(v.x); v.y = swish1(v.y); v.z = swish1(v.z); v.w = swish1(v.w);
        y4[i] = v;
    }
    for (long long i = n4 * 4 + t; i < n; i += stride) y[i] = swish1(x[i]);
}

void swish_launch(const float* x, float* y, long long n) {
    const int block = 256;
    bool aligned = ((((unsigned long long)x) | ((unsigned long long)y)) & 15) == 0;
    long long n4 = aligned ? n / 4 : 0;
    long long grid = (n / 4 + block - 1) / block;
    if (grid > 132 * 32) grid = 132 * 32;
    if (grid < 1) grid = 1;
    swish_vec4_kernel<<<(unsigned int)grid, block>>>(x, y, n, n4);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) printf("swish_fused_vec4: %s\n", cudaGetErrorString(e));
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

ext = load_inline(name="swish_fused_vec4", cpp_sources=cpp_src, cuda_sources=cuda_src,
                  functions=["swish_forward"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.swish_forward(x)
