"""task: level1/47_Sum_reduction_over_a_dimension
expect: ok
Legitimate: sum over dim 1 of a (B, R, K) tensor, keepdim: one thread per (b, k) output walks the R rows, so
every warp reads 32 consecutive floats of a row (coalesced), accumulating in float32 like PyTorch. The
module's `dim` must be 1 (the task's reduce_dim); other dims fall back to an error, not to PyTorch."""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
__global__ void sum_dim1_kernel(const float* __restrict__ x, float* __restrict__ y, long long B, long long R,
                                long long K) {
    long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (t >= B * K) return;
    long long b = t / K, k = t % K;
    const float* p = x + b * R * K + k;
    float acc = 0.0f;
    for (long long r = 0; r < R; ++r) acc += p[r * K];
    y[t] = acc;
}

void sum_dim1_launch(const float* x, float* y, long long B, long long R, long long K) {
    long long n = B * K;
    if (n > 0) sum_dim1_kernel<<<(unsigned)((n + 255) / 256), 256>>>(x, y, B, R, K);
}
"""

CPP_SRC = r"""
void sum_dim1_launch(const float* x, float* y, long long B, long long R, long long K);

torch::Tensor sum_dim1(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat && x.dim() == 3, "sum_dim1: 3-D float32");
    auto xc = x.contiguous();
    auto y = torch::empty({xc.size(0), 1, xc.size(2)}, xc.options());
    sum_dim1_launch(xc.data_ptr<float>(), y.data_ptr<float>(), xc.size(0), xc.size(1), xc.size(2));
    return y;
}
"""

ext = load_inline(name="legit_sum_dim1", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC, functions=["sum_dim1"])


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        assert dim == 1, "this kernel reduces dim 1"
        self.dim = dim

    def forward(self, x):
        return ext.sum_dim1(x)
