// kernel_eval.cu: the evaluator's own device code. bench.py builds it once through its build cache
// (cached_load_inline): the CUDA part as load_inline's cuda_sources, the C++ wrapper at the end of this file
// (below the `cpp_sources` marker) as its cpp_sources, so Python calls l2_flush / poison_fill / compare.
//
// This file deliberately includes only the CUDA runtime headers and talks in raw pointers: bench.py's build
// cache then skips the framework's type headers in front of it, so nvcc compiles it in about 2 s instead of
// about 30 s (REFERENCE.md section 2). Every launcher runs on the stream it is given (the caller's current
// stream) and returns cudaGetLastError(), which the wrapper turns into a Python exception.
//
//   l2_flush     writes every int32 of a buffer (2x the L2 size), so no timed call finds its data in L2; first
//                it turns persisting L2 lines back to normal and sets the persisting set-aside to 0, so a
//                candidate's access-policy window cannot keep its data in L2 across calls (REFERENCE.md
//                section 4 "L2 persistence"; normal writes alone do not evict persisting lines)
//   poison_fill  fills a buffer's bytes with 0xFF (NaN for every float type), so a candidate that returns
//                uninitialised memory gets poison instead of a freed reference answer (REFERENCE.md section 4)
//   compare      [max_abs_err, max_rel_err, mismatches, nans] of out vs ref in ONE pass over float32 data
//
// The comparison rule is PyTorch's isclose / allclose with equal_nan=False, evaluated in float32:
//   match(o, r)  =  (o == r)  ||  |o - r| <= atol + rtol * |r|
// so equal infinities match and any NaN is a mismatch. nans counts NaNs in out where ref is not NaN.
// max_abs_err = max |o - r| and max_rel_err = max |o - r| / (|r| + 1e-12), both over the elements whose
// difference is not NaN. The arithmetic uses explicitly rounded intrinsics (no fused multiply-add), so the
// CPU version in bench.py (compare_cpu), written with the same float32 operations, gives identical numbers.
#include <cstdint>
#include <cuda_runtime.h>

namespace {

constexpr int kThreads = 256;       // 8 warps per block
constexpr int kMaxBlocks = 4096;    // grid-stride loops: enough blocks to fill any current GPU

int blocks_for(int64_t n) {
    int64_t b = (n + kThreads - 1) / kThreads;
    if (b < 1) b = 1;
    if (b > kMaxBlocks) b = kMaxBlocks;
    return static_cast<int>(b);
}

__global__ void l2_flush_kernel(int32_t* __restrict__ buf, int64_t n) {
    const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
        buf[i] = static_cast<int32_t>(i);
    }
}

__global__ void fill_u32_kernel(uint32_t* __restrict__ p, int64_t n) {
    const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
        p[i] = 0xFFFFFFFFu;
    }
}

__global__ void fill_u8_kernel(uint8_t* __restrict__ p, int64_t n) {
    const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
        p[i] = 0xFFu;
    }
}

__device__ __forceinline__ float warp_max(float v) {
    for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, off));
    return v;
}

__device__ __forceinline__ unsigned long long warp_sum(unsigned long long v) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
    return v;
}

// acc_bits[0..1]: the bit patterns of max_abs / max_rel. Both are non-negative floats (or +inf), and for
// non-negative IEEE floats the unsigned order of the bit patterns is the numeric order, so atomicMax on the
// bits is a float max. acc_cnt[0..1]: mismatches and nans. All four start at zero.
__global__ void compare_kernel(const float* __restrict__ out, const float* __restrict__ ref, int64_t n,
                               float atol, float rtol, unsigned int* acc_bits, unsigned long long* acc_cnt) {
    float max_abs = 0.0f, max_rel = 0.0f;
    unsigned long long mism = 0, nans = 0;
    const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
        const float o = out[i];
        const float r = ref[i];
        const float d = fabsf(o - r);
        const float tol = __fadd_rn(atol, __fmul_rn(rtol, fabsf(r)));
        if (!((o == r) || (d <= tol))) ++mism;
        if (isnan(o) && !isnan(r)) ++nans;
        if (!isnan(d)) {
            max_abs = fmaxf(max_abs, d);
            max_rel = fmaxf(max_rel, __fdiv_rn(d, __fadd_rn(fabsf(r), 1e-12f)));
        }
    }
    // warp, then block, then one atomic per block
    max_abs = warp_max(max_abs);
    max_rel = warp_max(max_rel);
    mism = warp_sum(mism);
    nans = warp_sum(nans);
    __shared__ float s_abs[kThreads / 32];
    __shared__ float s_rel[kThreads / 32];
    __shared__ unsigned long long s_mism[kThreads / 32];
    __shared__ unsigned long long s_nans[kThreads / 32];
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    if (lane == 0) {
        s_abs[warp] = max_abs;
        s_rel[warp] = max_rel;
        s_mism[warp] = mism;
        s_nans[warp] = nans;
    }
    __syncthreads();
    if (warp == 0) {
        const int nwarps = blockDim.x >> 5;
        max_abs = lane < nwarps ? s_abs[lane] : 0.0f;
        max_rel = lane < nwarps ? s_rel[lane] : 0.0f;
        mism = lane < nwarps ? s_mism[lane] : 0ull;
        nans = lane < nwarps ? s_nans[lane] : 0ull;
        max_abs = warp_max(max_abs);
        max_rel = warp_max(max_rel);
        mism = warp_sum(mism);
        nans = warp_sum(nans);
        if (lane == 0) {
            atomicMax(&acc_bits[0], __float_as_uint(max_abs));
            atomicMax(&acc_bits[1], __float_as_uint(max_rel));
            if (mism) atomicAdd(&acc_cnt[0], mism);
            if (nans) atomicAdd(&acc_cnt[1], nans);
        }
    }
}

// Turns the accumulators into the float64 result on the device, so compare() never waits for the GPU.
__global__ void compare_finalize_kernel(const unsigned int* acc_bits, const unsigned long long* acc_cnt,
                                        double* result) {
    result[0] = static_cast<double>(__uint_as_float(acc_bits[0]));
    result[1] = static_cast<double>(__uint_as_float(acc_bits[1]));
    result[2] = static_cast<double>(acc_cnt[0]);
    result[3] = static_cast<double>(acc_cnt[1]);
}

}  // namespace

// ---- launchers: raw pointers in, cudaError_t out (declared again in the C++ wrapper below) ----

cudaError_t cudal1_l2_flush(int32_t* buf, int64_t n, cudaStream_t stream) {
    size_t persisting = 0;
    if (cudaDeviceGetLimit(&persisting, cudaLimitPersistingL2CacheSize) == cudaSuccess && persisting > 0)
        cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 0);
    cudaCtxResetPersistingL2Cache();
    cudaGetLastError();                                  // neither is supported everywhere: not an error here
    if (n <= 0) return cudaSuccess;
    l2_flush_kernel<<<blocks_for(n), kThreads, 0, stream>>>(buf, n);
    return cudaGetLastError();
}

cudaError_t cudal1_poison_fill(void* ptr, int64_t nbytes, cudaStream_t stream) {
    if (nbytes <= 0) return cudaSuccess;
    if (reinterpret_cast<uintptr_t>(ptr) % 4 == 0 && nbytes % 4 == 0) {
        fill_u32_kernel<<<blocks_for(nbytes / 4), kThreads, 0, stream>>>(static_cast<uint32_t*>(ptr), nbytes / 4);
    } else {
        fill_u8_kernel<<<blocks_for(nbytes), kThreads, 0, stream>>>(static_cast<uint8_t*>(ptr), nbytes);
    }
    return cudaGetLastError();
}

// acc_bits: two uint32 (max_abs, max_rel bits); acc_cnt: two uint64, 8-byte aligned; all zeroed by the caller.
cudaError_t cudal1_compare(const float* out, const float* ref, int64_t n, float atol, float rtol,
                           unsigned int* acc_bits, unsigned long long* acc_cnt, double* result, cudaStream_t stream) {
    if (n > 0) {
        compare_kernel<<<blocks_for(n), kThreads, 0, stream>>>(out, ref, n, atol, rtol, acc_bits, acc_cnt);
        cudaError_t err = cudaGetLastError();
        if (err != cudaSuccess) return err;
    }
    compare_finalize_kernel<<<1, 1, 0, stream>>>(acc_bits, acc_cnt, result);
    return cudaGetLastError();
}


// ==== cpp_sources: the C++ wrapper, compiled by g++ with the framework headers (bench.py defines the macro) ====
#ifdef CUDAL1_KERNEL_EVAL_WRAPPER
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

cudaError_t cudal1_l2_flush(int32_t* buf, int64_t n, cudaStream_t stream);
cudaError_t cudal1_poison_fill(void* ptr, int64_t nbytes, cudaStream_t stream);
cudaError_t cudal1_compare(const float* out, const float* ref, int64_t n, float atol, float rtol,
                           unsigned int* acc_bits, unsigned long long* acc_cnt, double* result, cudaStream_t stream);

static void check_launch(cudaError_t err, const char* what) {
    TORCH_CHECK(err == cudaSuccess, "kernel_eval ", what, ": ", cudaGetErrorString(err));
}

void l2_flush(torch::Tensor buf) {
    TORCH_CHECK(buf.is_cuda() && buf.scalar_type() == torch::kInt32 && buf.is_contiguous(),
                "l2_flush: a contiguous int32 CUDA tensor is expected");
    const c10::cuda::CUDAGuard guard(buf.device());
    check_launch(cudal1_l2_flush(buf.data_ptr<int32_t>(), buf.numel(), c10::cuda::getCurrentCUDAStream().stream()),
                 "l2_flush");
}

void poison_fill(torch::Tensor t) {
    TORCH_CHECK(t.is_cuda() && t.is_contiguous(), "poison_fill: a contiguous CUDA tensor is expected");
    const c10::cuda::CUDAGuard guard(t.device());
    check_launch(cudal1_poison_fill(t.data_ptr(), t.numel() * static_cast<int64_t>(t.element_size()),
                                    c10::cuda::getCurrentCUDAStream().stream()), "poison_fill");
}

torch::Tensor compare(torch::Tensor out, torch::Tensor ref, double atol, double rtol) {
    TORCH_CHECK(out.is_cuda() && ref.is_cuda() && out.device() == ref.device(),
                "compare: both tensors must be on one CUDA device");
    TORCH_CHECK(out.numel() == ref.numel(), "compare: ", out.numel(), " vs ", ref.numel(), " elements");
    const c10::cuda::CUDAGuard guard(out.device());
    auto o = out.detach().to(torch::kFloat).contiguous();
    auto r = ref.detach().to(torch::kFloat).contiguous();
    auto ws = torch::zeros({4}, o.options().dtype(torch::kInt64));     // acc_bits[2] | pad | acc_cnt[2]
    auto result = torch::empty({4}, o.options().dtype(torch::kFloat64));
    int64_t* w = ws.data_ptr<int64_t>();
    check_launch(cudal1_compare(o.data_ptr<float>(), r.data_ptr<float>(), o.numel(), static_cast<float>(atol),
                                static_cast<float>(rtol), reinterpret_cast<unsigned int*>(w),
                                reinterpret_cast<unsigned long long*>(w + 2), result.data_ptr<double>(),
                                c10::cuda::getCurrentCUDAStream().stream()), "compare");
    return result;
}
#endif  // CUDAL1_KERNEL_EVAL_WRAPPER
