# @expect: wrong
# @design: One fused kernel, one thread per (batch, spatial) position: loop over the features for the sum of squares, then loop again to write the normalised values.
# @analysis: Consecutive threads take consecutive positions, so every feature access is coalesced, and one kernel replaces eager's five memory passes and its x**2 temporary.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <cstdio>

__global__ void rms_fused_kernel(const float* __restrict__ x, float* __restrict__ y, long long P, long long C, long long S, float eps) {
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= P) return;
    long long b = p / S, s = p - b * S;
    const float* xp = x + b * C * S + s;
    float* yp = y + b * C * S + s;
    float ss = 0.0f;
    for (long long c = 0; c < C; ++c) { float v = xp[c * S]; ss += v * v; }
    float r = rsqrtf(ss + eps);
    for (long long c = 0; c < C; ++c) yp[c * S] = xp[c * S] * r;
}

void rms_launch(const float* x, float* y, long long B, long long C, long long S, float eps) {
    const int block = 256;
    long long P = B * S;
    long long grid = (P + block - 1) / block;
    rms_fused_kernel<<<(unsigned int)grid, block>>>(x, y, P, C, S, eps);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) printf("rmsnorm_wrong_math: %s\n", cudaGetErrorString(e));
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

ext = load_inline(name="rmsnorm_wrong_math", cpp_sources=cpp_src, cuda_sources=cuda_src,
                  functions=["rms_forward"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.rms_forward(x, self.eps)
