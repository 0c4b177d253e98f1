"""kernel_eval.cu, the evaluator's device code, and harness/kernel_eval.py, its loader and torch versions: the
source builds with the real nvcc; the torch versions give golden values worked out by hand (NaN, infinities, the
exact tolerance boundary, the fixed order of the float64 sums); a library changed on disk is refused and rebuilt;
the build folder is never inside the candidates' build root. On a GPU: every kernel gives the same bits as its
torch version on random and adversarial inputs, and the spin lasts in proportion to its cycles."""
import math
import os
import shutil
import struct
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from harness import judge  # noqa: E402
from harness import kernel_eval  # noqa: E402

ARCH = "sm_90"      # any arch nvcc 12-13 knows: the CPU tests only build and load (no kernel runs there)
NAN, INF = float("nan"), float("inf")


def needs_nvcc():
    try:
        kernel_eval.find_nvcc()
    except FileNotFoundError:
        pytest.skip("needs nvcc")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """kernel_eval.cu built once into a fresh folder of its own: (info, root, build_root)."""
    needs_nvcc()
    root, build_root = tmp_path_factory.mktemp("kernel_eval"), tmp_path_factory.mktemp("candidates")
    info = kernel_eval.prepare(arch=ARCH, root=str(root), build_root=str(build_root))
    print(f"kernel_eval.cu build: {info['build_s']:.1f} s for {ARCH}")
    return info, str(root), str(build_root)


# ---- building, loading, trust ----

def test_source_builds_with_nvcc_and_loads(built):
    info, root, build_root = built
    assert info["build_s"] > 0 and os.path.isfile(info["path"]) and info["path"].startswith(root)
    assert open(info["path"] + ".sha256").read().strip() == info["sha256"]
    again = kernel_eval.prepare(arch=ARCH, root=root, build_root=build_root)
    assert again["build_s"] == 0.0 and again["sha256"] == info["sha256"]       # built once, then found
    lib = kernel_eval.load(info)                 # no CUDA call: loading needs no GPU
    assert lib.cudal1_abi_version() == kernel_eval.ABI_VERSION
    assert lib.cudal1_compare_workspace(0) == 8 and lib.cudal1_compare_workspace(1) == 8 + 3
    assert lib.cudal1_compare_workspace(1025) == 8 + 3 * 2 + 3       # 2 tiles, then 1
    assert lib.cudal1_compare_workspace(1024 * 1024 + 1) == 8 + 3 * (1025 + 2 + 1)


def test_changed_library_is_refused_then_rebuilt(built):
    info, root, build_root = built
    data = open(info["path"], "rb").read()
    with open(info["path"], "ab") as f:          # what a candidate could do to a file of the same user
        f.write(b"\0")
    with pytest.raises(RuntimeError, match="refusing to load"):
        kernel_eval.load(info)
    with open(info["path"] + ".sha256", "w") as f:                  # the recorded hash changed to match: this
        f.write(kernel_eval._sha256_file(info["path"]) + "\n")     # process still knows the one it built
    again = kernel_eval.prepare(arch=ARCH, root=root, build_root=build_root)
    assert again["build_s"] > 0 and again["path"] == info["path"]
    assert kernel_eval._sha256_file(again["path"]) == again["sha256"] and open(again["path"], "rb").read() != \
        data + b"\0"
    kernel_eval.load(again)
    fake = dict(again, sha256="0" * 64)
    with pytest.raises(RuntimeError, match="refusing to load"):
        kernel_eval.load(fake)


def test_build_folder_is_never_inside_the_candidates_build_root(tmp_path, monkeypatch):
    monkeypatch.delenv("CUDAL1_KERNEL_EVAL_ROOT", raising=False)
    monkeypatch.delenv("CUDAL1_BUILD_ROOT", raising=False)
    assert not kernel_eval._inside(kernel_eval.default_root(), kernel_eval.candidates_build_root())
    assert os.path.basename(kernel_eval.default_root()) == "kernel_eval"
    with pytest.raises(ValueError, match="inside the candidates' build root"):
        kernel_eval.prepare(arch=ARCH, root=str(tmp_path / "build" / "x"), build_root=str(tmp_path / "build"))
    monkeypatch.setenv("CUDAL1_BUILD_ROOT", str(tmp_path))          # a build root above the default folder
    monkeypatch.setenv("CUDAL1_KERNEL_EVAL_ROOT", str(tmp_path / "kernel_eval"))
    with pytest.raises(ValueError, match="inside the candidates' build root"):
        kernel_eval.prepare(arch=ARCH)
    assert kernel_eval.for_worker("cpu") is None


# ---- torch versions, golden values by hand ----

def test_compare_torch_golden():
    out = torch.tensor([1.0, 2.0, 3.5, NAN, 0.0])
    ref = torch.tensor([1.0, 2.02, 3.0, 4.0, 1e-3])
    # |o-r| = [0, 0.02, 0.5, nan, 1e-3]; tol = 0.01 + 0.01|r| = [0.02, 0.0302, 0.04, 0.05, 0.01001]: 3.5 and the NaN
    # mismatch; max_rel = 1e-3 / (1e-3 + 1e-12) in float32
    s = kernel_eval.compare_torch(out, ref, 1e-2, 1e-2)
    assert (s["mismatches"], s["nans"], s["max_abs"]) == (2, 1, 0.5)
    want_rel = torch.tensor(1e-3 - 0.0, dtype=torch.float32) / (torch.tensor(1e-3) + 1e-12)
    assert s["max_rel"] == float(want_rel) and s["err_sq"] == 0.0 and s["mismatches_vs64"] == 0
    # the tolerance boundary, exact in binary: atol = rtol = 2^-7, r = 1 -> tol = 2^-6
    r = torch.ones(3)
    o = torch.tensor([1 + 2 ** -6, 1 + 2 ** -6 + 2 ** -23, 1 - 2 ** -6])
    assert kernel_eval.compare_torch(o, r, 2 ** -7, 2 ** -7)["mismatches"] == 1
    # infinities, as torch.isclose has them: equal ones match; a finite output or -inf against an infinite
    # reference does not (|o - r| = inf <= tol = inf would let it); its relative error inf/inf is NaN and left out
    s = kernel_eval.compare_torch(torch.tensor([INF, 1.0, -INF, -INF]), torch.tensor([INF, INF, -INF, INF]),
                                  1e-2, 1e-2)
    assert (s["mismatches"], s["nans"], s["max_abs"], s["max_rel"]) == (2, 0, INF, 0.0)
    want = torch.isclose(torch.tensor([INF, 1.0, -INF, -INF]), torch.tensor([INF, INF, -INF, INF]), 1e-2, 1e-2)
    assert int((~want).sum()) == 2
    # the float64 rescue: an infinite float32 reference (|r - t| = inf) rescues nothing
    big64 = torch.tensor([3e39], dtype=torch.float64)                           # past float32's range
    s = kernel_eval.compare_torch(torch.tensor([5.0]), torch.tensor([INF]), 1e-2, 1e-2, big64)
    assert s["mismatches_vs64"] == 1, s
    s = kernel_eval.compare_torch(torch.tensor([NAN, NAN]), torch.tensor([NAN, 1.0]), 1e-2, 1e-2)
    assert (s["mismatches"], s["nans"], s["max_abs"]) == (2, 1, 0.0)          # NaN never matches (equal_nan=False)
    s = kernel_eval.compare_torch(torch.tensor([1, 2, 7]), torch.tensor([1, 2, 4]), 1e-2, 1e-2)   # integers: equal
    assert (s["mismatches"], s["max_abs"], s["max_rel"]) == (1, 3.0, 0.75)
    assert kernel_eval.compare_torch(torch.tensor([]), torch.tensor([]), 1e-2, 1e-2)["mismatches"] == 0
    assert judge.compare(out, ref, 1e-2, 1e-2) == [0.5, float(want_rel), 2.0, 1.0]


def test_compare_torch_float64_sums_golden():
    # against the float64 truth t: e = o - t, f = r - t
    s = kernel_eval.compare_torch(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0]), 1e-2, 1e-2,
                                  torch.tensor([1.5, 2.0], dtype=torch.float64))
    assert (s["err_sq"], s["ref_sq"], s["ref_err_sq"], s["mismatches_vs64"]) == (0.25, 6.25, 0.25, 0)
    # |1.1 - 1| > 0.01 + 0.01 * 1 + |1 - 1|: a mismatch against float64 too
    s = kernel_eval.compare_torch(torch.tensor([1.1]), torch.tensor([1.0]), 1e-2, 1e-2,
                                  torch.tensor([1.0], dtype=torch.float64))
    assert s["mismatches_vs64"] == 1 and s["mismatches"] == 1
    # the order of the sums: t^2 = [2^52, 1/4, 0, 1/4, 0, 1/4, 0, 1/4] is 2^52 + 1 summed as a pairwise tree
    # (x[i] + x[i + 4], then x[i] + x[i + 2], then x[0] + x[1]), but 2^52 in index order (each 1/4 is below half
    # an ulp of 2^52 there)
    t = torch.tensor([2.0 ** 26, 0.5, 0, 0.5, 0, 0.5, 0, 0.5], dtype=torch.float64)
    s = kernel_eval.compare_torch(t.float(), t.float(), 0.0, 0.0, t)
    assert s["ref_sq"] == 2.0 ** 52 + 1 and s["err_sq"] == 0.0
    assert sum((t * t).tolist()) == 2.0 ** 52
    # tiles of 1024, then the tile sums: 3 tiles of ones -> 1024 + 1024 + 5; chunks that are whole tiles agree
    ones = torch.ones(2 * 1024 + 5, dtype=torch.float64)
    s = kernel_eval.compare_torch(ones.float(), ones.float(), 0.0, 0.0, ones * 0, chunk=1024)
    assert s["err_sq"] == 2053.0 and s["ref_sq"] == 0.0
    with pytest.raises(ValueError, match="elements"):
        kernel_eval.compare(torch.ones(3), torch.ones(3), 0.0, 0.0, torch.ones(4, dtype=torch.float64))


def test_relerr_and_mismatches_vs64_follow_the_sums():
    t = torch.tensor([3.0, 4.0], dtype=torch.float64)
    assert judge.relerr([torch.tensor([3.0, 4.0])], [t]) == 0.0
    assert judge.relerr([torch.tensor([3.0, 5.0])], [t]) == pytest.approx(1 / 5)        # sqrt(1 / 25)
    assert judge.relerr([torch.tensor([1.0])], [torch.zeros(1, dtype=torch.float64)]) is None
    out, ref = torch.tensor([1.0, 1.1]), torch.tensor([1.0, 1.0])
    assert judge.mismatches_vs64(out, ref, torch.ones(2, dtype=torch.float64), 1e-2, 1e-2) == 1.0


def test_checksum_poison_and_flush_torch_golden():
    b = torch.tensor([1, 2, 3, 4, 255, 0, 0, 128, 9], dtype=torch.uint8)
    # bytes: 1+2+3+4+255+0+0+128+9 = 402; words (little-endian int32): 0x04030201 = 67305985, 0x800000FF =
    # -2147483393; the 9th byte counts as a byte only
    assert kernel_eval.checksum_torch([b]) == 402 + 3 * (67305985 - 2147483393)
    assert kernel_eval.checksum([b]) == kernel_eval.checksum_torch([b]) and kernel_eval.checksum([]) == 0
    x = torch.zeros(3)
    kernel_eval.poison_fill(x)
    assert x.isnan().all() and x.view(torch.int32).eq(-1).all()
    buf = torch.empty(32, dtype=torch.uint8)
    kernel_eval.l2_flush(buf)
    assert buf.view(torch.int32).tolist() == list(range(8))
    with pytest.raises(ValueError, match="multiple of 16"):
        kernel_eval.l2_flush(torch.empty(20, dtype=torch.uint8))


# ---- GPU: the kernels against the torch versions, bit for bit ----

def same_bits(a, b):
    return (math.isnan(a) and math.isnan(b)) or struct.pack("<d", a) == struct.pack("<d", b)


def assert_same(kernel, torch_version, what):
    for k, v in torch_version.items():
        if isinstance(v, int):
            assert kernel[k] == v, (what, k, kernel[k], v)
        else:
            assert same_bits(kernel[k], v), (what, k, kernel[k].hex(), v.hex())


def adversarial(n, dtype, gen):
    """ref, out (same dtype) and the float64 truth: random values, then NaN, infinities, -0.0, subnormals, zeros
    and outputs at exactly the tolerance and one step past it."""
    ref64 = torch.randn(n, dtype=torch.float64, generator=gen, device="cuda") * 10
    if dtype.is_floating_point:
        ref = ref64.to(dtype)
        out = (ref.double() + torch.randn(n, dtype=torch.float64, generator=gen, device="cuda") * 0.02).to(dtype)
    else:
        lo, hi = (0, 2) if dtype == torch.bool else (-100, 100) if dtype != torch.uint8 else (0, 255)
        ref = torch.randint(lo, hi, (n,), generator=gen, device="cuda").to(dtype)
        out = ref.clone()
        flip = torch.rand(n, generator=gen, device="cuda") < 0.01
        out[flip] = (ref[flip].long() + 1).clamp(lo, hi - 1).to(dtype)
        return out, ref, ref64
    k = min(n, 16)
    if k:
        specials = torch.tensor([NAN, INF, -INF, -0.0, 0.0, 1e-40, -1e-45, 1.0, NAN, INF, 3.0, -2.0, 65504.0, 1e-8,
                                 2.0, 1.0], dtype=torch.float64)[:k]
        ref[:k] = specials.to(dtype)
        out[:k] = torch.tensor([NAN, INF, INF, 0.0, -0.0, 0.0, 1e-45, NAN, 1.0, 5.0, 3.0, -2.0, 65504.0, 0.0, 2.0,
                                1.0], dtype=torch.float64)[:k].to(dtype)
        ref64[:k] = torch.tensor([1.0, 2.0, -3.0, 0.0, 0.0, 1e-40, 0.0, 1.0, NAN, INF, 3.0, -2.0, 6e4, 0.0, 2.0,
                                  1.0], dtype=torch.float64)[:k]
    if n > 64:                                     # at the boundary: o = r + (atol + rtol |r|) and one ulp past
        r = ref[32:64].float()
        tol = torch.tensor(1e-2, dtype=torch.float32) + torch.tensor(1e-2, dtype=torch.float32) * r.abs()
        edge = r + tol
        edge[1::2] = torch.nextafter(edge[1::2], torch.full_like(edge[1::2], INF))
        out[32:64] = edge.to(dtype)
    return out, ref, ref64


SIZES = [0, 1, 17, 1023, 1024, 1025, 3 * 1024 * 1024 + 7]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64,
                                   torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool], ids=str)
def test_compare_kernel_equals_torch_bit_for_bit(dtype):
    gen = torch.Generator(device="cuda").manual_seed(7)
    for n in SIZES:
        out, ref, ref64 = adversarial(n, dtype, gen)
        for t in (ref64, None):
            got = kernel_eval.compare(out, ref, 1e-2, 1e-2, t)
            assert_same(got, kernel_eval.compare_torch(out, ref, 1e-2, 1e-2, t), (dtype, n, "cuda"))
            assert_same(got, kernel_eval.compare_torch(out.cpu(), ref.cpu(), 1e-2, 1e-2,
                                                       t.cpu() if t is not None else None), (dtype, n, "cpu"))
        if n >= 16 and dtype.is_floating_point:
            assert got["nans"] >= 1 and got["mismatches"] >= 1
        if n > 16:                                 # past the specials the float64 sums are finite: compared too
            finite = [x[16:] for x in (out, ref, ref64)]
            got = kernel_eval.compare(*finite[:2], 1e-2, 1e-2, finite[2])
            assert_same(got, kernel_eval.compare_torch(*finite[:2], 1e-2, 1e-2, finite[2]), (dtype, n, "finite"))
            assert 0 < got["err_sq"] < INF and 0 < got["ref_sq"] < INF, got


@pytest.mark.gpu
def test_compare_kernel_over_several_chunks_and_tree_levels():
    n = (1 << 26) + 1500                          # two chunks of the torch version; 65538 tiles: three levels
    gen = torch.Generator(device="cuda").manual_seed(3)
    out, ref, ref64 = adversarial(n, torch.float32, gen)
    got = kernel_eval.compare(out, ref, 1e-2, 1e-2, ref64)
    assert_same(got, kernel_eval.compare_torch(out, ref, 1e-2, 1e-2, ref64), "two chunks")
    assert got["mismatches"] > 0 and math.isnan(got["err_sq"])          # out[0] is NaN
    finite = kernel_eval.compare(out[16:], ref[16:], 1e-2, 1e-2, ref64[16:])   # past the NaNs and infinities
    assert_same(finite, kernel_eval.compare_torch(out[16:], ref[16:], 1e-2, 1e-2, ref64[16:]), "finite")
    assert 0 < finite["err_sq"] < INF and 0 < finite["ref_err_sq"] < INF and 0 < finite["ref_sq"] < INF


@pytest.mark.gpu
def test_checksum_poison_flush_kernels_equal_torch():
    gen = torch.Generator(device="cuda").manual_seed(5)
    raw = torch.randint(0, 256, (3 * (1 << 20) + 64,), dtype=torch.uint8, generator=gen, device="cuda")
    raw[:64] = 255                                             # negative words
    for start in (0, 1, 3, 4, 16):                             # aligned and unaligned starts
        for n in (0, 1, 3, 4, 17, 1 << 20, (1 << 20) + 7, 3 * (1 << 20)):
            part = raw[start:start + n]
            assert kernel_eval.checksum([part]) == kernel_eval.checksum_torch([part.cpu()]), (start, n)
    many = [raw[:100].view(torch.int32), raw[5:999], torch.randn(33, 7, device="cuda").t()]
    assert kernel_eval.checksum(many) == kernel_eval.checksum_torch([t.cpu() for t in many])
    for start, n in ((0, 4096), (1, 5), (3, 1000), (7, 33)):
        buf = torch.zeros(5000, dtype=torch.uint8, device="cuda")
        want = buf.clone()
        kernel_eval.poison_fill(buf[start:start + n])
        kernel_eval.poison_fill_torch(want[start:start + n])
        assert torch.equal(buf, want), (start, n)
    buf = torch.empty(2 * (1 << 20) + 48, dtype=torch.uint8, device="cuda")
    want = buf.clone()
    kernel_eval.l2_flush(buf)
    kernel_eval.l2_flush_torch(want)
    assert torch.equal(buf, want)


@pytest.mark.gpu
def test_spin_lasts_in_proportion_to_its_cycles():
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(5):
        kernel_eval.spin(1_000_000)             # working clocks first
    ms = {}
    for cycles in (1_000_000, 4_000_000):
        start.record()
        kernel_eval.spin(cycles)
        end.record()
        end.synchronize()
        ms[cycles] = start.elapsed_time(end)
    print(f"spin: {ms}")
    assert 3.0 < ms[4_000_000] / ms[1_000_000] < 5.0, ms
    assert 0.1 < ms[1_000_000] < 5.0, ms        # 1e6 cycles at 0.2-10 GHz


@pytest.mark.gpu
def test_build_time_on_this_gpu(tmp_path):
    needs_nvcc()
    info = kernel_eval.prepare(root=str(tmp_path / "kernel_eval"), build_root=str(tmp_path / "candidates"))
    print(f"kernel_eval.cu build on {torch.cuda.get_device_name()}: {info['build_s']:.2f} s ({info['arch']})")
    assert info["build_s"] > 0
    shutil.rmtree(tmp_path / "kernel_eval")
