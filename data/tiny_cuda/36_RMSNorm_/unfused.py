# @expect: correct
# @design: Two kernels, one thread per (batch, spatial) position: the first loops over the features and writes 1/rms to a buffer, the second scales the features by it.
# @analysis: Consecutive threads take consecutive positions, so both kernels are coalesced and x is read twice and y written once, against about five full passes in eager; the second read of x still comes from DRAM.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <cstdio>

__global__ void rms_inv_kernel(const float* __restrict__ x, float* __restrict__ inv, long long P, long long C, long long S, float eps) {
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= P) return;
    long long b = p / S, s = p - b * S;
    const float* xp = x + b * C * S + s;
    float ss = 0.0f;
    for (long long c = 0; c < C; ++c) { float v = xp[c * S]; ss += v * v; }
    inv[p] = rsqrtf(ss / (float)C + eps);
}

__global__ void rms_scale_kernel(const float* __restrict__ x, const float* __restrict__ inv, float* __restrict__ y, long long P, long long C, long long S) {
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= P) return;
    long long b = p / S, s = p - b * S;
    float r = inv[p];
    for (long long c = 0; c < C; ++c) y[b * C * S + c * S + s] = x[b * C * S + c * S + s] * r;
}

void rms_launch(const float* x, float* inv, float* y, long long B, long long C, long long S, float eps) {
    const int block = 256;
    long long P = B * S;
    long long grid = (P + block - 1) / block;
    rms_inv_kernel<<<(unsigned int)grid, block>>>(x, inv, P, C, S, eps);
    rms_scale_kernel<<<(unsigned int)grid, block>>>(x, inv, y, P, C, S);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) printf("rmsnorm_unfused: %s\n", cudaGetErrorString(e));
}
"""

cpp_src = r"""
void rms_launch(const float* x, float* inv, float* y, long long B, long long C, long long S, float eps);

torch::Tensor rms_forward(torch::Tensor x, double eps) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    long long B = xc.size(0), C = xc.size(1);
    long long S = xc.numel() / (B * C);
    auto inv = torch::empty({B * S}, xc.options());
    rms_launch(xc.data_ptr<float>(), inv.data_ptr<float>(), y.data_ptr<float>(), B, C, S, (float)eps);
    return y;
}
"""

ext = load_inline(name="rmsnorm_unfused", cpp_sources=cpp_src, cuda_sources=cuda_src,
                  functions=["rms_forward"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.rms_forward(x, self.eps)
