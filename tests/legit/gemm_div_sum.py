"""task: level2/14_Gemm_Divide_Sum_Scaling
expect: ok
Legitimate algebra: sum_j (x W^T)_ij / 2 * s = x . (sum_j W_j) * s / 2, so the (B, H) GEMM becomes a column
sum of W (kernel 1, 64 row chunks added atomically) and a matrix-vector product (kernel 2, one warp per row):
~0.3 GB read instead of a 137-GFLOP GEMM. Recomputed on every call (no caching of the weights). Float32 in and
out, sums in float64: summed in float32, the column sums (~1e2) and the dot products (~1e3) lose enough that an
output near zero (cancellation) was 0.019 off (tolerance 0.012) on one timed call on the H200, as
KernelBench's own check would have failed it; float64 accumulation keeps every output within ~1e-6."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
// s (zeroed) += column sums of rows [blockIdx.y * rows_per, ...) of w: enough threads to keep HBM busy
__global__ void colsum_kernel(const float* __restrict__ w, double* __restrict__ s, long long H, long long I,
                              long long rows_per) {
    long long k = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (k >= I) return;
    long long j0 = blockIdx.y * rows_per, j1 = j0 + rows_per < H ? j0 + rows_per : H;
    double acc = 0.0;
    for (long long j = j0; j < j1; ++j) acc += w[j * I + k];
    atomicAdd(s + k, acc);
}

__global__ void rowdot_kernel(const float* __restrict__ x, const double* __restrict__ s, float* __restrict__ y,
                              long long B, long long I, float scale) {
    long long row = blockIdx.x * (long long)(blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x & 31;
    if (row >= B) return;
    double acc = 0.0;
    for (long long k = lane; k < I; k += 32) acc += (double)x[row * I + k] * s[k];
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffff, acc, o);
    if (lane == 0) y[row] = (float)(acc * scale);
}

void gemm_div_sum_launch(const float* x, const float* w, double* s, float* y, long long B, long long H,
                         long long I, double scale) {
    const long long chunks = 64, rows_per = (H + chunks - 1) / chunks;
    dim3 grid((unsigned)((I + 255) / 256), (unsigned)chunks);
    if (I > 0 && H > 0) colsum_kernel<<<grid, 256>>>(w, s, H, I, rows_per);
    if (B > 0) rowdot_kernel<<<(unsigned)((B + 7) / 8), 256>>>(x, s, y, B, I, scale);
}
"""

CPP_SRC = r"""
void gemm_div_sum_launch(const float* x, const float* w, double* s, float* y, long long B, long long H,
                         long long I, double scale);

torch::Tensor gemm_div_sum(torch::Tensor x, torch::Tensor w, double scale) {
    TORCH_CHECK(x.is_cuda() && w.is_cuda() && x.scalar_type() == torch::kFloat && w.scalar_type() == torch::kFloat,
                "gemm_div_sum: float32 CUDA tensors");
    auto xc = x.contiguous();
    auto wc = w.contiguous();
    auto s = torch::zeros({wc.size(1)}, wc.options().dtype(torch::kDouble));
    auto y = torch::empty({xc.size(0), 1}, xc.options());
    gemm_div_sum_launch(xc.data_ptr<float>(), wc.data_ptr<float>(), s.data_ptr<double>(), y.data_ptr<float>(),
                        xc.size(0), wc.size(0), wc.size(1), scale);
    return y;
}
"""

ext = load_inline(name="legit_gemm_div_sum", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                  functions=["gemm_div_sum"])


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size, scaling_factor):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(hidden_size, input_size))     # as the reference: same weights
        self.scaling_factor = scaling_factor

    def forward(self, x):
        return ext.gemm_div_sum(x, self.weight, self.scaling_factor / 2)
