"""task: level1/23_Softmax
expect: ok
Legitimate: row softmax, one 1024-thread block per row: block max, block sum of exp(x - max), then the write
(three passes over the row; rows of 393216 floats do not fit in shared memory). Raw-pointer CUDA.
(The task itself is degenerate at 1e-2, REFERENCE.md §3: outputs are ~2.5e-6; the kernel is still exact.)"""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
__device__ float block_reduce(float v, bool is_max, float* shm) {
    for (int o = 16; o > 0; o >>= 1) {
        float w = __shfl_xor_sync(0xffffffff, v, o);
        v = is_max ? fmaxf(v, w) : v + w;
    }
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) shm[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < (blockDim.x >> 5) ? shm[lane] : (is_max ? -INFINITY : 0.0f);
        for (int o = 16; o > 0; o >>= 1) {
            float w = __shfl_xor_sync(0xffffffff, v, o);
            v = is_max ? fmaxf(v, w) : v + w;
        }
        if (lane == 0) shm[32] = v;
    }
    __syncthreads();
    float r = shm[32];
    __syncthreads();
    return r;
}

__global__ void softmax_kernel(const float* __restrict__ x, float* __restrict__ y, long long cols) {
    __shared__ float shm[33];
    const float* xr = x + blockIdx.x * cols;
    float* yr = y + blockIdx.x * cols;
    float m = -INFINITY;
    for (long long i = threadIdx.x; i < cols; i += blockDim.x) m = fmaxf(m, xr[i]);
    m = block_reduce(m, true, shm);
    float s = 0.0f;
    for (long long i = threadIdx.x; i < cols; i += blockDim.x) s += expf(xr[i] - m);
    s = block_reduce(s, false, shm);
    float inv = 1.0f / s;
    for (long long i = threadIdx.x; i < cols; i += blockDim.x) yr[i] = expf(xr[i] - m) * inv;
}

void softmax_launch(const float* x, float* y, long long rows, long long cols) {
    if (rows > 0) softmax_kernel<<<(unsigned)rows, 1024>>>(x, y, cols);
}
"""

CPP_SRC = r"""
void softmax_launch(const float* x, float* y, long long rows, long long cols);

torch::Tensor softmax_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat && x.dim() == 2, "softmax_forward: 2-D float32");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    softmax_launch(xc.data_ptr<float>(), y.data_ptr<float>(), xc.size(0), xc.size(1));
    return y;
}
"""

ext = load_inline(name="legit_softmax", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC, functions=["softmax_forward"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.softmax_forward(x)
