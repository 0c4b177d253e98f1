"""bench.py on a CUDA GPU (run on the GPU machine: python -m pytest -m gpu tests/test_bench_gpu.py).

KernelBench level1/25_Swish (4096 x 393216 floats, 6.4 GB per tensor) against hand-written candidates: a fused
kernel is correct and faster; a half-written output, uninitialised memory, an illegal memory access and a side
stream each get the right verdict; kernel_eval.cu's compare agrees with compare_cpu, and its flush and poison
kernels write what they should. KernelBench is found at $KERNELBENCH_DIR or ../shared/kernelbench."""
import math
import os
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(ROOT, "tests", "fixtures")
sys.path.insert(0, ROOT)
import bench  # noqa: E402

KB = os.environ.get("KERNELBENCH_DIR") or os.path.join(ROOT, "..", "shared", "kernelbench")
SWISH = os.path.join(KB, "level1", "25_Swish.py")
pytestmark = pytest.mark.gpu
KW = dict(device="cuda", num_correct_trials=2, time_budget_s=2.0, timeout_s=900)


def src(name):
    return open(os.path.join(FIX, name)).read()


@pytest.fixture(scope="module")
def swish(tmp_path_factory):
    if not os.path.exists(SWISH):
        pytest.skip(f"KernelBench not found at {KB} (set KERNELBENCH_DIR)")
    return open(SWISH).read()


@pytest.fixture(scope="module")
def build_root(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("build"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CUDAL1_BUILD_ROOT", root)          # for load_kernel_eval() in this process
        yield root


@pytest.fixture(scope="module")
def results(swish, build_root):
    """One evaluate_many: kernel_eval.cu and the three CUDA candidates build in parallel, then each is timed."""
    names = ["fused", "half", "illegal", "side_stream", "empty"]
    jobs = [(n, swish, src(f"gpu_swish_{n}.py")) for n in names]
    res = bench.evaluate_many(jobs, build_root=build_root, progress=True, **KW)
    return dict(zip(names, res))


def test_fused_kernel_is_correct_and_faster(results):
    r = results["fused"]
    assert r["status"] == "ok", bench.result_summary(r)
    assert r["correct"] and r["trials"] == 2 and r["mismatches"] == 0 and r["nans"] == 0
    assert r["speedup"] > 1.2, bench.result_summary(r)      # eager Swish is two kernels: ~2x expected
    assert r["device_name"] and r["device_name"] != "cpu" and r["backend_flags"] == bench.FIXED_FLAGS
    assert r["input_shapes"] == [[4096, 393216]] and r["timed_calls"] >= bench.MIN_CALLS * bench.ROUNDS


def test_half_written_output_is_incorrect(results):
    r = results["half"]
    assert r["status"] == "incorrect", bench.result_summary(r)
    n = 4096 * 393216
    assert r["mismatches"] >= n // 2 - 4 and r["nans"] >= n // 2 - 4    # the poisoned half is NaN


def test_empty_like_without_work_is_incorrect(results):
    r = results["empty"]
    assert r["status"] == "incorrect", bench.result_summary(r)
    assert r["nans"] > 0                                                # got poison, not a freed answer


def test_side_stream_is_caught(results, swish, build_root):
    r = results["side_stream"]
    assert (r["status"], r["hack"]) == ("hack", "side_stream"), bench.result_summary(r)
    r = bench.evaluate(swish, src("gpu_swish_side_stream.py"), static_checks=False, build_root=build_root, **KW)
    assert r["status"] == "ok", bench.result_summary(r)                 # correct once the device is synchronised
    assert r["speedup"] < 1.3, bench.result_summary(r)                 # and its work is inside the timed window


def test_illegal_memory_access_then_next_evaluation_works(results, swish, build_root):
    r = results["illegal"]
    assert r["status"] in ("runtime_error", "crash"), bench.result_summary(r)
    assert r["compiled"] and not r["correct"]
    r = bench.evaluate(swish, src("gpu_swish_fused.py"), build_root=build_root, **KW)
    assert r["status"] == "ok" and r["compile_s"] < 30, bench.result_summary(r)   # the build is cached


def test_kernel_eval_compare_matches_cpu(results):
    ke = bench.load_kernel_eval()          # built in phase 1 of `results`: a cache hit
    g = torch.Generator().manual_seed(0)
    for n in (0, 1, 1000, 1_000_003, 50_000_000):
        for special in (False, True):
            ref = torch.randn(n, generator=g)
            out = ref + torch.randn(n, generator=g) * 0.001            # well inside atol = rtol = 1e-2
            want = (0, 0)
            if n >= 1000:
                idx = torch.randperm(n, generator=g)[:97]
                out[idx[:50]] += 0.5                                    # planted mismatches
                out[idx[50:80]] = float("nan")                          # NaN where ref is not: mismatch and nan
                want = (80, 30)
                if special:
                    ref[idx[80:85]] = float("nan")                      # NaN in ref: mismatch, not a "nan"
                    out[idx[85:90]] = ref[idx[85:90]] = float("inf")    # equal infinities match
                    out[idx[90:]] = float("-inf")                       # -inf vs finite: mismatch, max_abs inf
                    want = (92, 30)
            for dtype in (torch.float32, torch.float16):
                o, r = out.to(dtype), ref.to(dtype)
                gpu = ke.compare(o.cuda(), r.cuda(), 1e-2, 1e-2).tolist()
                cpu = bench.compare_cpu(o, r, 1e-2, 1e-2)
                assert gpu[2:] == cpu[2:] == [float(w) for w in want], (n, special, dtype, gpu, cpu)
                for a, b in zip(gpu[:2], cpu[:2]):                      # same float32 formulas: same maxima
                    assert a == b or a == pytest.approx(b, rel=1e-6), (n, special, dtype, gpu, cpu)
                if special and n >= 1000:
                    assert math.isinf(gpu[0])
                elif n >= 1000:
                    assert 0.49 < gpu[0] < 0.51


def test_kernel_eval_flush_and_poison(results):
    ke = bench.load_kernel_eval()
    buf = torch.zeros(3_000_001, dtype=torch.int32, device="cuda")
    ke.l2_flush(buf)
    assert torch.equal(buf.cpu(), torch.arange(3_000_001, dtype=torch.int32))
    t = torch.zeros(1001, device="cuda")
    ke.poison_fill(t)
    assert t.isnan().all()
    b = torch.zeros(7, dtype=torch.uint8, device="cuda")                # not a multiple of 4 bytes
    ke.poison_fill(b)
    assert (b == 255).all()
    h = torch.zeros(3, dtype=torch.float16, device="cuda")
    ke.poison_fill(h)
    assert h.isnan().all()
