// kernel_eval.cu: the evaluator's own device code, run by the judge and by the clock (harness/runner.py Clock) on both
// sides of every timed call. Plain CUDA C with extern "C" entry points that take raw device pointers, sizes and a
// stream: no framework headers, so nvcc builds it in seconds (4.7 s on the H200 box for sm_90 with nvcc 13.0, about
// 7-20 s on a busy 2-core CPU box; REFERENCE.md §2 gives the cost of those headers). harness/kernel_eval.py builds it
// once per machine, CUDA compiler, GPU arch and torch version into a folder of the evaluator's own (never the
// candidates' build root), loads it by path and content hash through ctypes, and holds a torch version of every
// function for the CPU device and for the tests.
//
// Every entry point makes `device` current in this library's own CUDA runtime (linked statically; it shares
// the device's primary context with torch's), launches on `stream` and returns a cudaError_t (0 = success).
//
//   cudal1_l2_flush     persisting L2 lines back to normal and no persisting set-aside (a candidate's
//                       access-policy window cannot keep its data in L2 across calls; plain writes do not evict
//                       persisting lines: REFERENCE.md §4 "L2 persistence"), then writes every 32-bit word of a
//                       buffer (2x the L2 size) with its index, so no timed call finds its data in L2
//   cudal1_spin         one thread that spins for `cycles` SM clock cycles: the clock queues the model's
//                       launches while it runs, so a timed window holds device time, not launch latency
//   cudal1_poison_fill  every byte of a buffer to 0xFF (NaN in every float type): a candidate that returns memory
//                       it never wrote gets poison instead of a freed reference answer (REFERENCE.md §4)
//   cudal1_checksum     adds to acc[4] the sums that make exchange.checksum exact: the bytes, the low and high 16
//                       bits of every whole int32 word, and the count of negative words
//   cudal1_compare      one pass over an output, its fp32 reference and (optionally) the float64 reference:
//                       max abs/rel error, isclose mismatches, NaNs, mismatches against float64 and the three
//                       float64 sums of the precision error (harness/kernel_eval.py compare gives the rules)
//
// The float64 sums have one fixed order, which the torch version repeats, so both give the same bits: the
// elements in tiles of kTile = 1024 (zeros past the end), each tile summed as a pairwise tree (x[i] + x[i + h]
// for h = 512, 256, ..., 1), then the tile sums in tiles of 1024 the same way, until one value is left. Every
// operation is a single IEEE-rounded add, multiply, divide or compare in the stated precision; the build uses
// --fmad=false so no multiply and add are fused (torch runs them as separate kernels).
#include <cstdint>
#include <cuda_runtime.h>
#include <cuda_fp16.h>

namespace {

constexpr int kThreads = 256;            // threads per block; a compare tile is 4 elements per thread
constexpr int kTile = 4 * kThreads;      // elements per tile of the float64 sums (1024)
constexpr int kMaxBlocks = 4096;         // grid-stride loops: enough blocks to fill any current GPU

int blocks_for(int64_t work_items) {
    int64_t b = (work_items + kThreads - 1) / kThreads;
    if (b < 1) b = 1;
    if (b > kMaxBlocks) b = kMaxBlocks;
    return static_cast<int>(b);
}

// ------------------------------------------------------------------------------------------- flush, spin, fill

__global__ void l2_flush_kernel(uint4* __restrict__ buf, int64_t n16) {
    const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n16; i += stride) {
        const unsigned w = static_cast<unsigned>(4 * i);       // the index of the first word (mod 2^32)
        buf[i] = make_uint4(w, w + 1u, w + 2u, w + 3u);
    }
}

__global__ void spin_kernel(long long cycles) {
    const long long start = clock64();
    while (clock64() - start < cycles) {
    }
}

__global__ void fill_ff_kernel(uint8_t* __restrict__ p, int64_t nbytes) {
    // 16-byte stores over the aligned body, byte stores at both ends
    const uintptr_t addr = reinterpret_cast<uintptr_t>(p);
    int64_t head = static_cast<int64_t>((16 - (addr & 15)) & 15);
    if (head > nbytes) head = nbytes;
    const int64_t n16 = (nbytes - head) / 16;
    const int64_t tail_start = head + n16 * 16;
    uint4* body = reinterpret_cast<uint4*>(p + head);
    const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
    for (int64_t i = tid; i < n16; i += stride) body[i] = make_uint4(~0u, ~0u, ~0u, ~0u);
    if (tid < head) p[tid] = 0xFFu;
    if (tid < nbytes - tail_start) p[tail_start + tid] = 0xFFu;
}

// ---------------------------------------------------------------------------------------------------- checksum

struct Sums {
    unsigned long long bytes, lo16, hi16, neg;
};

__device__ __forceinline__ void add_word(Sums& s, uint32_t w) {
    s.bytes += __vsadu4(w, 0u);                                 // the sum of its four bytes
    s.lo16 += w & 0xFFFFu;
    s.hi16 += w >> 16;
    s.neg += w >> 31;
}

__device__ __forceinline__ unsigned long long warp_sum(unsigned long long v) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
    return v;
}

// Sums over the bytes [0, nbytes) of p: the whole words count as words (little-endian, from p), the last
// nbytes % 4 bytes as bytes only. vec16: p is 16-byte aligned and the body is read 16 bytes at a time.
template <bool kVec16>
__global__ void checksum_kernel(const uint8_t* __restrict__ p, int64_t nbytes, unsigned long long* acc) {
    Sums s{0, 0, 0, 0};
    const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
    const int64_t nwords = nbytes / 4;
    int64_t word0 = 0;                                          // first word not covered by the vector body
    if (kVec16) {
        const int64_t n16 = nbytes / 16;
        const uint4* v = reinterpret_cast<const uint4*>(p);
        for (int64_t i = tid; i < n16; i += stride) {
            const uint4 q = v[i];
            add_word(s, q.x);
            add_word(s, q.y);
            add_word(s, q.z);
            add_word(s, q.w);
        }
        word0 = n16 * 4;
    }
    for (int64_t i = word0 + tid; i < nwords; i += stride) {
        const int64_t b = 4 * i;
        const uint32_t w = static_cast<uint32_t>(p[b]) | (static_cast<uint32_t>(p[b + 1]) << 8) |
                           (static_cast<uint32_t>(p[b + 2]) << 16) | (static_cast<uint32_t>(p[b + 3]) << 24);
        add_word(s, w);
    }
    if (tid < nbytes - 4 * nwords) s.bytes += p[4 * nwords + tid];
    s.bytes = warp_sum(s.bytes);
    s.lo16 = warp_sum(s.lo16);
    s.hi16 = warp_sum(s.hi16);
    s.neg = warp_sum(s.neg);
    if ((threadIdx.x & 31) == 0) {
        if (s.bytes) atomicAdd(&acc[0], s.bytes);
        if (s.lo16) atomicAdd(&acc[1], s.lo16);
        if (s.hi16) atomicAdd(&acc[2], s.hi16);
        if (s.neg) atomicAdd(&acc[3], s.neg);
    }
}

// ----------------------------------------------------------------------------------------------------- compare

// dtype codes shared with harness/kernel_eval.py (_DTYPE_CODES)
enum DType { kF32 = 0, kF64 = 1, kF16 = 2, kBF16 = 3, kI64 = 4, kI32 = 5, kI16 = 6, kI8 = 7, kU8 = 8, kBool = 9 };

template <typename T, typename W> struct Load {
    __device__ __forceinline__ static W get(const T* p, int64_t i) { return static_cast<W>(p[i]); }
};
template <typename W> struct Load<__half, W> {
    __device__ __forceinline__ static W get(const __half* p, int64_t i) { return static_cast<W>(__half2float(p[i])); }
};
struct BF16 { uint16_t bits; };
template <typename W> struct Load<BF16, W> {
    __device__ __forceinline__ static W get(const BF16* p, int64_t i) {
        return static_cast<W>(__uint_as_float(static_cast<uint32_t>(p[i].bits) << 16));
    }
};

__device__ __forceinline__ float w_add(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ float w_mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ float w_div(float a, float b) { return __fdiv_rn(a, b); }
__device__ __forceinline__ double w_add(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ double w_mul(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ double w_div(double a, double b) { return __ddiv_rn(a, b); }

// The header of the workspace (8-byte words): maxima as the bits of non-negative doubles (their unsigned order is
// the numeric order, so atomicMax on the bits is a max), counts, then the three float64 totals.
enum Slot { kMaxAbs = 0, kMaxRel = 1, kMism = 2, kNans = 3, kMism64 = 4, kErrSq = 5, kRefSq = 6, kRefErrSq = 7,
            kHeader = 8 };

__device__ __forceinline__ unsigned long long warp_max(unsigned long long v) {
    for (int off = 16; off > 0; off >>= 1) {
        const unsigned long long o = __shfl_down_sync(0xffffffffu, v, off);
        v = o > v ? o : v;
    }
    return v;
}

// The pairwise tree of one tile: the thread holds its elements tid, tid+256, tid+512, tid+768 (x0..x3); level
// 1024 -> 512 adds x[i] + x[i+512] (x0 + x2, x1 + x3), level 512 -> 256 adds those two, then shared memory.
// The block's three tile sums land in out[0], out[m], out[2m] (m = the number of tiles at this level).
__device__ __forceinline__ void tile_tree(const double (&x)[3][4], double (*s)[kThreads], double* out, int64_t tile,
                                          int64_t m) {
    for (int k = 0; k < 3; ++k) s[k][threadIdx.x] = __dadd_rn(__dadd_rn(x[k][0], x[k][2]), __dadd_rn(x[k][1], x[k][3]));
    __syncthreads();
    for (int h = kThreads / 2; h > 0; h >>= 1) {
        if (threadIdx.x < h)
            for (int k = 0; k < 3; ++k) s[k][threadIdx.x] = __dadd_rn(s[k][threadIdx.x], s[k][threadIdx.x + h]);
        __syncthreads();
    }
    if (threadIdx.x == 0)
        for (int k = 0; k < 3; ++k) out[k * m + tile] = s[k][0];
    __syncthreads();                                            // s is reused by the next tile
}

template <typename T, typename W, bool kExact>
__global__ void compare_kernel(const T* __restrict__ out, const T* __restrict__ ref, const double* __restrict__ r64,
                               int64_t n, W atol, W rtol, double atol64, double rtol64, unsigned long long* head,
                               double* partial, int64_t ntiles) {
    __shared__ double s[3][kThreads];
    W max_abs = 0, max_rel = 0;
    unsigned long long mism = 0, nans = 0, mism64 = 0;
    for (int64_t tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
        double x[3][4];
        for (int k = 0; k < 4; ++k) {
            const int64_t i = tile * kTile + k * kThreads + threadIdx.x;
            x[0][k] = x[1][k] = x[2][k] = 0.0;
            if (i >= n) continue;
            const W o = Load<T, W>::get(out, i);
            const W r = Load<T, W>::get(ref, i);
            const W d = fabs(o - r);
            const W tol = w_add(atol, w_mul(rtol, fabs(r)));   // infinite for an infinite r: then only o == r matches
            const bool ok = kExact ? (o == r) : ((o == r) || (isfinite(tol) && d <= tol));
            mism += !ok;
            nans += isnan(o) && !isnan(r);
            if (!isnan(d)) {
                max_abs = d > max_abs ? d : max_abs;
                const W rel = w_div(d, w_add(fabs(r), static_cast<W>(1e-12)));
                if (!isnan(rel)) max_rel = rel > max_rel ? rel : max_rel;
            }
            if (r64 != nullptr) {
                const double t = r64[i];
                const double o64 = static_cast<double>(o), r_64 = static_cast<double>(r);
                const double e = __dsub_rn(o64, t), f = __dsub_rn(r_64, t);
                const double tol = __dadd_rn(__dadd_rn(atol64, __dmul_rn(rtol64, fabs(t))), fabs(f));
                mism64 += !((o64 == t) || (isfinite(tol) && fabs(e) <= tol));
                x[0][k] = __dmul_rn(e, e);
                x[1][k] = __dmul_rn(t, t);
                x[2][k] = __dmul_rn(f, f);
            }
        }
        if (r64 != nullptr) tile_tree(x, s, partial, tile, ntiles);
    }
    unsigned long long a = __double_as_longlong(static_cast<double>(max_abs));
    unsigned long long b = __double_as_longlong(static_cast<double>(max_rel));
    a = warp_max(a);
    b = warp_max(b);
    mism = warp_sum(mism);
    nans = warp_sum(nans);
    mism64 = warp_sum(mism64);
    if ((threadIdx.x & 31) == 0) {
        if (a) atomicMax(&head[kMaxAbs], a);
        if (b) atomicMax(&head[kMaxRel], b);
        if (mism) atomicAdd(&head[kMism], mism);
        if (nans) atomicAdd(&head[kNans], nans);
        if (mism64) atomicAdd(&head[kMism64], mism64);
    }
}

// One more level of the tree: the m values of each of the three arrays in `in` (stride m) to ceil(m / 1024)
// tile sums in `out` (stride ceil(m / 1024)), zeros past the end.
__global__ void tree_kernel(const double* __restrict__ in, int64_t m, double* out, int64_t ntiles) {
    __shared__ double s[3][kThreads];
    for (int64_t tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
        double x[3][4];
        for (int k = 0; k < 4; ++k) {
            const int64_t i = tile * kTile + k * kThreads + threadIdx.x;
            for (int a = 0; a < 3; ++a) x[a][k] = i < m ? in[a * m + i] : 0.0;
        }
        tile_tree(x, s, out, tile, ntiles);
    }
}

int64_t tiles(int64_t n) { return (n + kTile - 1) / kTile; }

template <typename T, bool kExact>
cudaError_t launch_compare(const void* out, const void* ref, const double* r64, int64_t n, double atol, double rtol,
                           unsigned long long* head, double* partial, int64_t ntiles, cudaStream_t stream) {
    const int grid = static_cast<int>(ntiles < kMaxBlocks ? (ntiles > 0 ? ntiles : 1) : kMaxBlocks);
    if (sizeof(T) == 8 && !kExact) {            // float64 tensors compare in float64 (judge.compare's rule)
        compare_kernel<T, double, kExact><<<grid, kThreads, 0, stream>>>(
            static_cast<const T*>(out), static_cast<const T*>(ref), r64, n, atol, rtol, atol, rtol, head, partial,
            ntiles);
    } else {
        compare_kernel<T, float, kExact><<<grid, kThreads, 0, stream>>>(
            static_cast<const T*>(out), static_cast<const T*>(ref), r64, n, static_cast<float>(atol),
            static_cast<float>(rtol), atol, rtol, head, partial, ntiles);
    }
    return cudaGetLastError();
}

}  // namespace

extern "C" {

int cudal1_abi_version() { return 1; }

const char* cudal1_error_string(int err) { return cudaGetErrorString(static_cast<cudaError_t>(err)); }

int cudal1_l2_flush(int device, void* buf, int64_t nbytes, cudaStream_t stream) {
    cudaError_t err = cudaSetDevice(device);
    if (err != cudaSuccess) return err;
    size_t persisting = 0;
    if (cudaDeviceGetLimit(&persisting, cudaLimitPersistingL2CacheSize) == cudaSuccess && persisting > 0)
        cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 0);
    cudaCtxResetPersistingL2Cache();
    cudaGetLastError();                         // neither is supported on every GPU: not an error here
    if (nbytes / 16 <= 0) return cudaSuccess;
    l2_flush_kernel<<<blocks_for(nbytes / 16), kThreads, 0, stream>>>(static_cast<uint4*>(buf), nbytes / 16);
    return cudaGetLastError();
}

int cudal1_spin(int device, long long cycles, cudaStream_t stream) {
    cudaError_t err = cudaSetDevice(device);
    if (err != cudaSuccess) return err;
    spin_kernel<<<1, 1, 0, stream>>>(cycles);
    return cudaGetLastError();
}

int cudal1_poison_fill(int device, void* ptr, int64_t nbytes, cudaStream_t stream) {
    cudaError_t err = cudaSetDevice(device);
    if (err != cudaSuccess || nbytes <= 0) return err;
    fill_ff_kernel<<<blocks_for(nbytes / 16 + 16), kThreads, 0, stream>>>(static_cast<uint8_t*>(ptr), nbytes);
    return cudaGetLastError();
}

// acc: 4 device words, zeroed by the caller, summed into (several tensors may share them).
int cudal1_checksum(int device, const void* ptr, int64_t nbytes, unsigned long long* acc, cudaStream_t stream) {
    cudaError_t err = cudaSetDevice(device);
    if (err != cudaSuccess || nbytes <= 0) return err;
    const uint8_t* p = static_cast<const uint8_t*>(ptr);
    if ((reinterpret_cast<uintptr_t>(p) & 15) == 0)
        checksum_kernel<true><<<blocks_for(nbytes / 16 + 4), kThreads, 0, stream>>>(p, nbytes, acc);
    else
        checksum_kernel<false><<<blocks_for(nbytes / 4 + 4), kThreads, 0, stream>>>(p, nbytes, acc);
    return cudaGetLastError();
}

// 8-byte words of compare's workspace for n elements: the header, then three arrays per level of the tree.
int64_t cudal1_compare_workspace(int64_t n) {
    int64_t words = kHeader;
    for (int64_t m = tiles(n); m > 0; m = m > 1 ? tiles(m) : 0) words += 3 * m;
    return words;
}

// out, ref: n elements of `dtype`; r64: n doubles or null (then the mismatches against float64 and the sums
// stay 0). workspace: cudal1_compare_workspace(n) words; its header holds the results when the stream gets there.
int cudal1_compare(int device, int dtype, const void* out, const void* ref, const double* r64, int64_t n,
                   double atol, double rtol, void* workspace, cudaStream_t stream) {
    cudaError_t err = cudaSetDevice(device);
    if (err != cudaSuccess) return err;
    unsigned long long* head = static_cast<unsigned long long*>(workspace);
    double* level = reinterpret_cast<double*>(head + kHeader);
    err = cudaMemsetAsync(head, 0, kHeader * sizeof(unsigned long long), stream);
    if (err != cudaSuccess || n <= 0) return err;
    const int64_t m0 = tiles(n);
    switch (dtype) {
        case kF32: err = launch_compare<float, false>(out, ref, r64, n, atol, rtol, head, level, m0, stream); break;
        case kF64: err = launch_compare<double, false>(out, ref, r64, n, atol, rtol, head, level, m0, stream); break;
        case kF16: err = launch_compare<__half, false>(out, ref, r64, n, atol, rtol, head, level, m0, stream); break;
        case kBF16: err = launch_compare<BF16, false>(out, ref, r64, n, atol, rtol, head, level, m0, stream); break;
        case kI64: err = launch_compare<long long, true>(out, ref, r64, n, atol, rtol, head, level, m0, stream); break;
        case kI32: err = launch_compare<int32_t, true>(out, ref, r64, n, atol, rtol, head, level, m0, stream); break;
        case kI16: err = launch_compare<int16_t, true>(out, ref, r64, n, atol, rtol, head, level, m0, stream); break;
        case kI8: err = launch_compare<int8_t, true>(out, ref, r64, n, atol, rtol, head, level, m0, stream); break;
        case kU8:
        case kBool: err = launch_compare<uint8_t, true>(out, ref, r64, n, atol, rtol, head, level, m0, stream); break;
        default: return cudaErrorInvalidValue;
    }
    if (err != cudaSuccess || r64 == nullptr) return err;
    int64_t m = m0;
    while (m > 1) {                             // the tile sums, level by level, down to one value per array
        const int64_t next = tiles(m);
        double* up = level + 3 * m;
        tree_kernel<<<static_cast<int>(next < kMaxBlocks ? next : kMaxBlocks), kThreads, 0, stream>>>(level, m, up,
                                                                                                   next);
        err = cudaGetLastError();
        if (err != cudaSuccess) return err;
        level = up;
        m = next;
    }
    return cudaMemcpyAsync(head + kErrSq, level, 3 * sizeof(double), cudaMemcpyDeviceToDevice, stream);
}

}  // extern "C"
