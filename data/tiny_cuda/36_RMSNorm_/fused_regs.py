# @expect: correct
# @design: One fused kernel, one thread per (batch, spatial) position, the feature loop fully unrolled so up to 64 features stay in registers between the sum of squares and the scaling; a plain two-loop kernel covers more features.
# @analysis: Holding the features in registers makes x read exactly once and y written once, the minimum traffic, and the 64 independent loads per thread keep many requests in flight; eager needs about five passes.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <cstdio>

__global__ void rms_regs_kernel(const float* __restrict__ x, float* __restrict__ y, long long P, int C, long long S, float eps) {
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= P) return;
    long long b = p / S, s = p - b * S;
    const float* xp = x + b * C * S + s;
    float* yp = y + b * C * S + s;
    float v[64];
    float ss = 0.0f;
    #pragma unroll
    for (int c = 0; c < 64; ++c) {
        if (c < C) { v[c] = __ldg(xp + c * S); ss += v[c] * v[c]; }
    }
    float r = rsqrtf(ss / (float)C + eps);
    #pragma unroll
    for (int c = 0; c < 64; ++c) {
        if (c < C) yp[c * S] = v[c] * r;
    }
}

__global__ void rms_loop_kernel(const float* __restrict__ x, float* __restrict__ y, long long P, int C, long long S, float eps) {
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= P) return;
    long long b = p / S, s = p - b * S;
    const float* xp = x + b * C * S + s;
    float* yp = y + b * C * S + s;
    float ss = 0.0f;
    for (int c = 0; c < C; ++c) { float v = xp[c * S]; ss += v * v; }
    float r = rsqrtf(ss / (float)C + eps);
    for (int c = 0; c < C; ++c) yp[c * S] = xp[c * S] * r;
}

void rms_launch(const float* x, float* y, long long B, long long C, long long S, float eps) {
    const int block = 256;
    long long P = B * S;
    long long grid = (P + block - 1) / block;
    if (C <= 64) rms_regs_kernel<<<(unsigned int)grid, block>>>(x, y, P, (int)C, S, eps);
    else rms_loop_kernel<<<(unsigned int)grid, block>>>(x, y, P, (int)C, S, eps);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) printf("rmsnorm_fused_regs: %s\n", cudaGetErrorString(e));
}
"""

cpp_src = r"""
void rms_launch(const float* x, float* y, long long B, long long C, long long S, float eps);

torch::Tensor rms_forward(torch::Tensor x, double eps) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    long long B = xc.size(0), C = xc.size(1);
    rms_launch(xc.data_ptr<float>(), y.data_ptr<float>(), B, C, xc.numel() / (B * C), (float)eps);
    return y;
}
"""

ext = load_inline(name="rmsnorm_fused_regs", cpp_sources=cpp_src, cuda_sources=cuda_src,
                  functions=["rms_forward"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.rms_forward(x, self.eps)
