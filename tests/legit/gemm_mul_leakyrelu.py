"""task: level2/12_Gemm_Multiply_LeakyReLU
expect: ok
Legitimate: the GEMM stays in cuBLAS (torch.addmm, the same call nn.Linear makes, so the same numbers) and the
multiply + LeakyReLU epilogue is ONE CUDA kernel working in place on the GEMM's output (eager PyTorch runs two
more elementwise kernels and one more allocation). The nn.Linear is created like the reference's, so the weights
match (same seed, same order)."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
__global__ void mul_leaky_kernel(float* __restrict__ y, long long n, float mult, float slope) {
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride) {
        float v = y[i] * mult;
        y[i] = v >= 0.0f ? v : v * slope;
    }
}

void mul_leaky_launch(float* y, long long n, float mult, float slope) {
    long long blocks = (n + 255) / 256;
    if (blocks > 132 * 32) blocks = 132 * 32;
    if (n > 0) mul_leaky_kernel<<<(unsigned)blocks, 256>>>(y, n, mult, slope);
}
"""

CPP_SRC = r"""
void mul_leaky_launch(float* y, long long n, float mult, float slope);

torch::Tensor mul_leaky_(torch::Tensor y, double mult, double slope) {
    TORCH_CHECK(y.is_cuda() && y.scalar_type() == torch::kFloat && y.is_contiguous(), "mul_leaky_: float32");
    mul_leaky_launch(y.data_ptr<float>(), y.numel(), (float)mult, (float)slope);
    return y;
}
"""

ext = load_inline(name="legit_mul_leaky", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC, functions=["mul_leaky_"])


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.multiplier, self.negative_slope = multiplier, negative_slope

    def forward(self, x):
        y = torch.addmm(self.gemm.bias, x, self.gemm.weight.t())      # (B, out), a fresh tensor
        return ext.mul_leaky_(y, self.multiplier, self.negative_slope)
