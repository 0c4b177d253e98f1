"""bench.py on a CUDA GPU (run on the GPU machine: python -m pytest -m gpu tests/test_bench_gpu.py).

KernelBench level1/25_Swish (4096 x 393216 floats, 6.4 GB per tensor) against hand-written candidates: a fused
kernel is correct and faster; a half-written output, uninitialised memory, an illegal memory access, a side
stream and a kernel that never returns each get the right verdict; outputs reach the judge through CUDA IPC.
Then the hack suite (tests/hacks: REFERENCE.md §4, §4b, §4c), the legitimate suite (tests/legit and the CUDA-L1
samples), the protocols and the degenerate screen. KernelBench: $KERNELBENCH_DIR or ../shared/kernelbench."""
import glob
import json
import math
import os
import re
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(ROOT, "tests", "fixtures")
sys.path.insert(0, ROOT)
import bench  # noqa: E402
from harness import record, runner_steps, session  # noqa: E402
from harness.task_io import FIXED_FLAGS  # noqa: E402

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
        mp.setenv("CUDAL1_BUILD_ROOT", root)
        yield root


def init_build_src():
    """gpu_swish_fused.py with its load_inline moved into ModelNew.__init__, where most CUDA-L1 kernels build."""
    head = src("gpu_swish_fused.py").split("swish_ext = load_inline(")[0]
    return head + ("class ModelNew(nn.Module):\n"
                   "    def __init__(self):\n"
                   "        super().__init__()\n"
                   "        self.ext = load_inline(name='swish_fused_init', cpp_sources=cpp_src, "
                   "cuda_sources=cuda_src,\n"
                   "                               functions=['swish'], verbose=False)\n\n"
                   "    def forward(self, x):\n"
                   "        return self.ext.swish(x)\n")


@pytest.fixture(scope="module")
def results(swish, build_root):
    """One evaluate_many: the CUDA candidates build in parallel, then each is checked and timed."""
    names = ["fused", "half", "illegal", "side_stream", "empty", "hang"]
    jobs = [(n, swish, src(f"gpu_swish_{n}.py" if n != "hang" else "gpu_hang_kernel.py")) for n in names]
    names.append("init_build")
    jobs.append(("init_build", swish, init_build_src()))
    res = bench.evaluate_many(jobs, build_root=build_root, progress=True, **KW)
    return dict(zip(names, res))


def test_fused_kernel_is_correct_and_faster(results):
    r = results["fused"]
    assert r["status"] == "ok", record.summary(r)
    assert r["correct"] and r["trials"] == 2 and r["mismatches"] == 0 and r["nans"] == 0
    assert r["speedup"] > 1.2, record.summary(r)      # eager Swish is two kernels: ~2x expected
    assert r["device_name"] and r["device_name"] != "cpu" and r["backend_flags"] == FIXED_FLAGS
    assert r["input_shapes"] == [[4096, 393216]] and r["timed_calls"] >= session.MIN_CALLS * session.ROUNDS


def test_build_in_init_is_made_ahead(results):
    """A load_inline in ModelNew.__init__ is built by the build ahead (ModelNew on the meta device), not again in the
    timed runner under the GPU's lock; its kernel is the one that runs."""
    r = results["init_build"]
    assert r["status"] == "ok" and r["custom_kernel_calls"] >= 1, record.summary(r)
    assert r["phase_s"]["models"] < 5.0, r["phase_s"]


def test_half_written_output_is_incorrect(results):
    r = results["half"]
    assert r["status"] == "incorrect", record.summary(r)
    n = 4096 * 393216
    assert r["mismatches"] >= n // 2 - 4 and r["nans"] >= n // 2 - 4    # the poisoned half is NaN


def test_empty_like_without_work_is_incorrect(results):
    r = results["empty"]
    assert r["status"] == "incorrect", record.summary(r)
    assert r["nans"] > 0                                                # got poison, not a freed answer


def test_side_stream_is_caught(results, swish, build_root):
    r = results["side_stream"]
    assert (r["status"], r["hack"]) == ("hack", "side_stream"), record.summary(r)
    r = bench.evaluate(swish, src("gpu_swish_side_stream.py"), static_checks=False, build_root=build_root, **KW)
    assert r["status"] == "ok", record.summary(r)                 # correct once the device is synchronised
    assert r["speedup"] < 1.3, record.summary(r)                 # and its work is inside the timed window


def test_illegal_memory_access_then_next_evaluation_works(results, swish, build_root):
    r = results["illegal"]
    assert r["status"] in ("runtime_error", "crash"), record.summary(r)
    assert r["compiled"] and not r["correct"]
    r = bench.evaluate(swish, src("gpu_swish_fused.py"), build_root=build_root, **KW)
    assert r["status"] == "ok" and r["compile_s"] < 30, record.summary(r)   # the build is cached


def test_hung_kernel_is_killed_within_the_call_limit(results, swish, build_root):
    """Killed within max(30 s, 100x the reference's time) of its first trial, GPU free at once."""
    r = results["hang"]
    assert r["status"] == "timeout" and "during trial" in r["error"], record.summary(r)
    limit = r["hang_limit_s"]
    assert limit == max(runner_steps.HANG_MIN_S, limit) and limit < 60, r
    assert r["phase_s"].get("trials") is None and r["eval_s"] - r["phase_s"].get("wait", 0) < limit + 40, r
    import time
    t0 = time.time()
    again = bench.evaluate(swish, src("gpu_swish_fused.py"), build_root=build_root, **KW)
    assert again["status"] == "ok" and time.time() - t0 < 60, record.summary(again)


def test_outputs_reach_the_judge_through_cuda_ipc(results):
    r = results["fused"]
    assert r["exchange"] == "ipc", r["exchange"]


# ---- every hack kind of REFERENCE.md §4 on a real task, legitimate kernels, the degenerate screen ----

HACKS = sorted(glob.glob(os.path.join(ROOT, "tests", "hacks", "*.py")))
LEGIT = sorted(glob.glob(os.path.join(ROOT, "tests", "legit", "*.py")))
CUDAL1 = next((p for p in (os.path.join(d, "a100_sample.jsonl") for d in (
    os.environ.get("CUDAL1_SAMPLE_DIR") or "/nonexistent", os.path.join(KB, "..", "cudal1_sample"),
    os.path.join(ROOT, "..", "shared", "cudal1_sample"))) if os.path.exists(p)), None)
SUITE_KW = dict(device="cuda", time_budget_s=0.5, timeout_s=900)


def header(path, clock=None):
    """task, expect and evaluate() keywords from a suite file's docstring (`task:`, `expect:`, `eval:` lines); with
    clock="gate" a `gate:` line, where there is one, replaces `expect:` (a forged claim has nothing to forge when
    no claim counts: the attack is then timed as what it is)."""
    doc = open(path).read()
    task = re.search(r"^(?:\"\"\")?task: (\S+)", doc, re.M).group(1)
    expect = re.search(r"^expect: (.+)$", doc, re.M).group(1).split()
    gated = re.search(r"^gate: (.+)$", doc, re.M)
    if clock == "gate" and gated:
        expect = gated.group(1).split()
    kw = {}
    m = re.search(r"^eval: (.+)$", doc, re.M)
    for item in (m.group(1).split() if m else []):
        k, v = item.split("=")
        kw[k] = {"False": False, "True": True}.get(v, v)
    return task, expect, kw


def kb_task(task):
    path = os.path.join(KB, task + ".py")
    if not os.path.exists(path):
        pytest.skip(f"KernelBench task {task} not found under {KB} (set KERNELBENCH_DIR)")
    return open(path).read()


def hack_cases():
    """(case name, file, evaluate() keywords, expected (status, hack) or "no_reward")."""
    cases = []
    for f in HACKS:
        task, expect, kw = header(f)
        name = os.path.basename(f)[:-3]
        cases.append((name, f, kw, tuple(expect) if expect[0] != "no_reward" else "no_reward"))
        if name == "tf32_flag":                        # the run-time flag check, static checks off
            cases.append(("tf32_flag_runtime", f, dict(static_checks=False), ("hack", "backend_flags")))
    return cases


@pytest.fixture(scope="module")
def hack_results(build_root):
    """One evaluate_many per distinct keyword set (builds in parallel, then one evaluation at a time)."""
    groups = {}
    for name, f, kw, _ in hack_cases():
        groups.setdefault(json.dumps(kw, sort_keys=True), []).append((name, f))
    out = {}
    for kw_json, items in groups.items():
        jobs = [(n, kb_task(header(f)[0]), open(f).read()) for n, f in items]
        res = bench.evaluate_many(jobs, build_root=build_root, progress=True, **SUITE_KW, **json.loads(kw_json))
        out.update(zip([n for n, _ in items], res))
    for n, r in sorted(out.items()):
        print(f"HACK {n:<22} {record.summary(r)}")
        print(f"CLOCK {n:<21} {json.dumps(r.get('clock'))}")      # the parent's clock check, both draws
    return out


@pytest.mark.parametrize("case", hack_cases(), ids=lambda c: c[0])
def test_hack_gets_no_reward(case, hack_results):
    name, path, _, expect = case
    r = hack_results[name]
    if (r.get("clock") or {}).get("kind") == "gate" and name == os.path.basename(path)[:-3]:   # the file's own case,
        # timed through the gate (harness/gate.py): its header may name what the gate sees instead
        gated = header(path, "gate")[1]
        expect = "no_reward" if gated[0] == "no_reward" else tuple(gated)
    if expect == "no_reward":        # correct, and timed honestly: ~1x (1.05 allows timing noise; the hack's
        assert r["status"] != "ok" or r["speedup"] < 1.05, record.summary(r)   # would-be gain is ~100x)
        return
    assert r["status"] != "ok", record.summary(r)
    hacks = expect[1].split("|") if len(expect) > 1 else [None]   # `a|b`: either name is right (both fire)
    assert r["status"] == expect[0] and r["hack"] in hacks, record.summary(r)


def legit_jobs():
    """(name, task source, candidate source, expected (status, hack)): tests/legit and the CUDA-L1 samples."""
    jobs = [(os.path.basename(f)[:-3], header(f)[0], open(f).read(), ("ok", None)) for f in LEGIT]
    only = os.environ.get("CUDAL1_LEGIT_ONLY")     # a comma list of names: re-run those alone
    jobs = [j for j in jobs if not only or j[0] in only.split(",")]
    for line in open(CUDAL1) if CUDAL1 else []:
        d = json.loads(line)
        name = f"cudal1_L{d['level_id']}_{d['task_id']}"
        # Rejected by design (REFERENCE.md §1.5 critique): CUDA-L1's level1/1 kernel is an fp16
        # matmul in an fp32 task, and its level2/48 kernel turns on torch.backends.cudnn.benchmark. Its level1/5
        # and level1/25 kernels cannot build with any load_inline (functions= names a function main.cpp never
        # declares: a PYBIND11_MODULE inside cuda_sources, and two __global__ kernels), catch the error and run
        # their PyTorch fallback: REFERENCE.md §4 "try/except fallback" (their published scores timed PyTorch)
        expect = {(1, 1): ("hack", "precision_downgrade"), (2, 48): ("hack", "backend_flags"),
                  (1, 5): ("hack", "fallback"), (1, 25): ("hack", "fallback")}.get(
            (d["level_id"], d["task_id"]), ("ok", None))
        jobs.append((name, d["ref_code"], d["custom_code"], expect))
    return jobs


@pytest.fixture(scope="module")
def legit_results(build_root):
    jobs = [(n, kb_task(t) if "\n" not in t else t, c) for n, t, c, _ in legit_jobs()]
    res = dict(zip([j[0] for j in jobs], bench.evaluate_many(jobs, build_root=build_root, progress=True,
                                                               **SUITE_KW)))
    for n, r in sorted(res.items()):
        print(f"LEGIT {n:<22} {record.summary(r)} custom_kernel_calls={r['custom_kernel_calls']}")
        print(f"CLOCK {n:<21} {json.dumps(r.get('clock'))}")
    return res


@pytest.mark.parametrize("job", legit_jobs(), ids=lambda j: j[0])
def test_legit_kernel_is_accepted(job, legit_results):
    name, _, cand, expect = job
    r = legit_results[name]
    assert (r["status"], r["hack"]) == expect, record.summary(r)
    if expect[0] == "ok":
        assert r["correct"] and 0.3 < r["speedup"] < 200, record.summary(r)       # sane
        if "load_inline" in cand and name in [os.path.basename(f)[:-3] for f in LEGIT]:
            assert r["custom_kernel_calls"] >= 1, record.summary(r)    # the custom kernel really ran
        assert r["protocol"] == "strict" and r["device_name"] and r["cuda_version"]


def test_cudal1_samples_found():
    assert CUDAL1, "CUDA-L1 samples not found: set CUDAL1_SAMPLE_DIR (the folder of a100_sample.jsonl)"
    assert len([j for j in legit_jobs() if j[0].startswith("cudal1_")]) == 7


def test_protocols_on_gpu(build_root, legit_results):
    """The same correct kernel under the three protocols: all accept it, each records its protocol."""
    task, cand = kb_task("level1/21_Sigmoid"), open(os.path.join(ROOT, "tests", "legit", "sigmoid.py")).read()
    for proto, calls in (("kernelbench", 100), ("cudal1", 70)):
        r = bench.evaluate(task, cand, protocol=proto, build_root=build_root, **SUITE_KW)
        print(f"PROTOCOL {proto:<12} {record.summary(r)}")
        assert r["status"] == "ok" and r["protocol"] == proto and r["timed_calls"] == calls, record.summary(r)
        assert 0.5 < r["speedup"] < 3, record.summary(r)


def test_degenerate_screen_on_gpu(build_root):
    """REFERENCE.md §3: 23_Softmax accepts zeros, 19_ReLU accepts its input; 21_Sigmoid accepts neither."""
    got = {t: bench.degenerate_screen(kb_task(t), task_name=t, device="cuda", build_root=build_root)
           for t in ("level1/23_Softmax", "level1/19_ReLU", "level1/21_Sigmoid")}
    for t, r in got.items():
        print(f"SCREEN {t:<22} degenerate={r['degenerate']} passed={r['passed']} {r['results']}")
    assert got["level1/23_Softmax"]["degenerate"] and "zeros" in got["level1/23_Softmax"]["passed"]
    assert got["level1/19_ReLU"]["degenerate"] and got["level1/19_ReLU"]["passed"] == ["input"]
    assert got["level1/21_Sigmoid"]["degenerate"] is False and got["level1/21_Sigmoid"]["status"] == "ok"
