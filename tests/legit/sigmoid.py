"""task: level1/21_Sigmoid
expect: ok
Legitimate: sigmoid as one hand-written elementwise CUDA kernel (float4 loads and stores, int64 indices, a scalar
tail). The CUDA part is raw pointers only (bench's fast prelude); the C++ wrapper allocates the output."""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
__device__ __forceinline__ float op(float v) { return 1.0f / (1.0f + expf(-v)); }

__global__ void sigmoid_kernel(const float* __restrict__ x, float* __restrict__ y, long long n) {
    long long n4 = n / 4;
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4; i += stride) {
        float4 v = reinterpret_cast<const float4*>(x)[i];
        v.x = op(v.x); v.y = op(v.y); v.z = op(v.z); v.w = op(v.w);
        reinterpret_cast<float4*>(y)[i] = v;
    }
    for (long long i = n4 * 4 + blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride)
        y[i] = op(x[i]);
}

void sigmoid_launch(const float* x, float* y, long long n) {
    if (n == 0) return;
    long long blocks = (n / 4 + 255) / 256;
    if (blocks > 132 * 64) blocks = 132 * 64;          // grid-stride: a few waves on an H100/H200
    if (blocks < 1) blocks = 1;
    sigmoid_kernel<<<(unsigned)blocks, 256>>>(x, y, n);
}
"""

CPP_SRC = r"""
void sigmoid_launch(const float* x, float* y, long long n);

torch::Tensor sigmoid_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat, "sigmoid_forward: a float32 CUDA tensor");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    sigmoid_launch(xc.data_ptr<float>(), y.data_ptr<float>(), xc.numel());
    return y;
}
"""

ext = load_inline(name="legit_sigmoid", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC, functions=["sigmoid_forward"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.sigmoid_forward(x)
