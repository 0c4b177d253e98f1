# @expect: correct
# @design: One warp per (batch, spatial) position: each lane reduces every 32nd feature, a shuffle sum gives the mean square, then the lanes write their features.
# @analysis: The features of one position lie 1 MiB apart, so each warp load touches 32 separate cache lines for 32 useful floats; the uncoalesced loads and stores make this slower than eager despite the single pass.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <cstdio>

__global__ void rms_warp_kernel(const float* __restrict__ x, float* __restrict__ y, long long P, long long C, long long S, float eps) {
    long long w = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x % 32;
    if (w >= P) return;
    long long b = w / S, s = w - b * S;
    const float* xp = x + b * C * S + s;
    float* yp = y + b * C * S + s;
    float ss = 0.0f;
    for (long long c = lane; c < C; c += 32) { float v = xp[c * S]; ss += v * v; }
    for (int o = 16; o > 0; o /= 2) ss += __shfl_xor_sync(0xffffffff, ss, o);
    float r = rsqrtf(ss / (float)C + eps);
    for (long long c = lane; c < C; c += 32) yp[c * S] = xp[c * S] * r;
}

void rms_launch(const float* x, float* y, long long B, long long C, long long S, float eps) {
    const int block = 256;
    long long P = B * S;
    long long grid = (P * 32 + block - 1) / block;
    rms_warp_kernel<<<(unsigned int)grid, block>>>(x, y, P, C, S, eps);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) printf("rmsnorm_warp_per_position: %s\n", cudaGetErrorString(e));
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

ext = load_inline(name="rmsnorm_warp_per_position", cpp_sources=cpp_src, cuda_sources=cuda_src,
                  functions=["rms_forward"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.rms_forward(x, self.eps)
