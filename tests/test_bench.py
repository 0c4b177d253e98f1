"""bench.py on the CPU: every failure class and hack of the fixtures comes out with the right status, the result
record is complete, the comparison and the rounding match golden values, the build cache builds once, never
collides and survives a stale lock, and the CLI exits 0/1. All candidates run once, in parallel, in a module
fixture (the real C++ compiles dominate: ~1-2 min on 2 cores)."""
import glob
import json
import math
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(ROOT, "tests", "fixtures")
sys.path.insert(0, ROOT)
import bench  # noqa: E402
from harness import buildcache, judge, options, record, runner, runner_steps, session, workers  # noqa: E402
from harness.scan import static_check  # noqa: E402
from harness.task_io import FIXED_FLAGS  # noqa: E402

TASK = open(os.path.join(FIX, "cpu_task_scale.py")).read()
KEYS = {"task", "candidate_hash", "status", "compiled", "correct", "speedup", "speedup_rounded", "ref_ms", "cand_ms",
        "error", "error_type", "hack", "max_abs_err", "max_rel_err", "mismatches", "nans", "trials", "timed_calls",
        "protocol", "device_name", "torch_version", "cuda_version", "backend_flags", "compile_s", "eval_s"}
CPP_SRC = open(os.path.join(FIX, "cand_cpp_scale.py")).read().split('CPP_SRC = r"""')[1].split('"""')[0]
CPP_SRC_3X = CPP_SRC.replace("2.0f", "3.0f")   # another source under the same name= (and a stale-lock victim)


def src(name):
    return open(os.path.join(FIX, name)).read()


# name -> (candidate file, extra evaluate() keywords)
CASES = {
    "cpp": ("cand_cpp_scale.py", {}),
    "cpp_broken": ("cand_cpp_broken.py", {}),
    "correct": ("cand_scale_correct.py", {}),
    "wrong": ("cand_scale_wrong.py", {}),
    "segfault": ("cand_segfault.py", dict(static_checks=False)),      # ctypes: the static scan flags it
    "hang": ("cand_hang.py", dict(timeout_s=10)),                     # it burns a core until the timeout
    "raise": ("cand_raise.py", {}),
    "exit": ("cand_exit.py", dict(static_checks=False)),              # os._exit: likewise
    "no_modelnew": ("cand_no_modelnew.py", {}),
    "no_modelnew_unchecked": ("cand_no_modelnew.py", dict(static_checks=False)),
    "mutate": ("cand_mutate_input.py", {}),
    "return_input": ("cand_return_input.py", {}),
    "get_inputs": ("cand_get_inputs.py", {}),
    "tf32": ("cand_tf32.py", {}),
    "tf32_unchecked": ("cand_tf32.py", dict(static_checks=False)),
    "patch": ("cand_patch_timer.py", dict(static_checks=False)),      # the run-time check, not the scan
    "patch_static": ("cand_patch_timer.py", {}),
    "lazy": ("cand_lazy.py", {}),
    "call_counting": ("cand_call_counting.py", {}),
}


def cpp_entries(build_root):
    """The build entries folder of cand_cpp_scale.py (buildcache.ENTRIES in its runners)."""
    return os.path.join(build_root, "candidates", record.source_hash(src("cand_cpp_scale.py")))


def _stale_lock_build(build_root):
    """Builds CPP_SRC_3X in a fresh process, into cand_cpp_scale.py's build entries, after planting torch's `lock`
    file in its build folder."""
    key = buildcache.build_key(buildcache.inline_args("cudal1_test_scale", CPP_SRC_3X, functions=["scale_shift"]))
    os.makedirs(os.path.join(cpp_entries(build_root), key), exist_ok=True)
    open(os.path.join(cpp_entries(build_root), key, "lock"), "w").close()     # as left by a build killed at its timeout
    code = (f"import sys; sys.path.insert(0, {ROOT!r}); from harness import buildcache; "
            f"buildcache.ENTRIES[:] = [{cpp_entries(build_root)!r}]; "
            f"m = buildcache.cached_load_inline(name='cudal1_test_scale', cpp_sources={CPP_SRC_3X!r}, "
            f"functions=['scale_shift']); print(m.__name__)")
    t0 = time.time()
    try:
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=420,
                           env=dict(os.environ, CUDAL1_BUILD_ROOT=build_root))
        return dict(rc=p.returncode, out=p.stdout + p.stderr, seconds=time.time() - t0)
    except subprocess.TimeoutExpired:
        return dict(rc=None, out="hung on the stale lock", seconds=time.time() - t0)


def _cli(cand):
    p = subprocess.run([sys.executable, os.path.join(ROOT, "bench.py"), os.path.join(FIX, "cpu_task_scale.py"),
                        os.path.join(FIX, cand), "--device", "cpu", "--num_correct_trials", "2"],
                       capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout + p.stderr


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """Runs every case, the stale-lock build, evaluate_many and the CLI once, 3 at a time (the two C++ builds
    first, so that they overlap)."""
    build_root = str(tmp_path_factory.mktemp("build"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CUDAL1_BUILD_ROOT", build_root)
        mp.setenv("CUDAL1_PCH", "0")          # the PCH costs ~100 s here; test_pch_* (slow) covers it
        with ThreadPoolExecutor(3) as pool:
            stale = pool.submit(_stale_lock_build, build_root)
            futures = {name: pool.submit(bench.evaluate, TASK, src(f), task_name=name, device="cpu",
                                         num_correct_trials=3, time_budget_s=0.3, **dict(dict(timeout_s=240), **kw))
                       for name, (f, kw) in CASES.items()}
            jobs = [("a", TASK, src("cand_scale_correct.py")), ("b", TASK, src("cand_no_modelnew.py")),
                    ("c", TASK, src("cand_scale_correct.py"), dict(num_correct_trials=1, check_only=True))]
            seen = []
            many = pool.submit(bench.evaluate_many, jobs, device="cpu", num_correct_trials=2, time_budget_s=0.2,
                               timeout_s=240, build_workers=2, on_result=lambda i, r: seen.append((i, r["status"])))
            cli = {c: pool.submit(_cli, c) for c in ("cand_scale_correct.py", "cand_scale_wrong.py")}
            out = dict(build_root=build_root, res={k: f.result() for k, f in futures.items()}, stale=stale.result(),
                       many=many.result(), many_seen=seen, cli={k: f.result() for k, f in cli.items()})
        yield out


def check(res, status, hack=None):
    assert res["status"] == status, record.summary(res)
    assert res["hack"] == hack, record.summary(res)
    return res


# ---- results of the fixtures ----

def test_correct_candidate(env):
    r = check(env["res"]["correct"], "ok")
    assert r["correct"] and r["compiled"] and r["trials"] == 3
    assert math.isfinite(r["speedup"]) and r["speedup"] > 0
    assert r["speedup"] == pytest.approx(r["ref_ms"] / r["cand_ms"])
    assert r["speedup_rounded"] == record.round_toward_one(r["speedup"])
    assert r["mismatches"] == 0 and r["nans"] == 0 and r["max_abs_err"] < 1e-5
    assert r["timed_calls"] >= session.MIN_CALLS * session.ROUNDS and r["device_name"] == "cpu"


def test_record_has_every_key_and_is_json(env):
    for name, r in env["res"].items():
        assert KEYS <= set(r), (name, KEYS - set(r))
        assert r["status"] in {"ok", "static", "compile_error", "runtime_error", "incorrect", "timeout", "crash",
                               "hack"}
        assert json.loads(json.dumps(r))["candidate_hash"] == r["candidate_hash"]
        assert len(r["candidate_hash"]) == 16 and r["protocol"] == "strict" and r["eval_s"] >= 0
        assert isinstance(r["error"], str) and len(r["error"]) <= runner._ERR_CHARS + 10
        if r["status"] != "ok":
            assert r["error"], name
        if not r["correct"]:
            assert r["speedup"] is None, name


def test_wrong_candidate_is_incorrect(env):
    r = check(env["res"]["wrong"], "incorrect")
    assert not r["correct"] and r["compiled"] and r["speedup"] is None
    assert r["mismatches"] == 256 * 1024 and r["nans"] == 0
    assert r["max_abs_err"] == pytest.approx(0.1, rel=1e-3) and r["trials"] == 0


def test_segfault_is_a_crash(env):
    r = check(env["res"]["segfault"], "crash")
    assert r["error_type"] == "SIGSEGV" and "Segmentation fault" in r["error"]   # faulthandler's traceback


def test_endless_loop_times_out(env):
    r = check(env["res"]["hang"], "timeout")
    assert r["compiled"] and r["eval_s"] < 60      # the partial record survives; the process group was killed


def test_exception_is_a_runtime_error(env):
    r = check(env["res"]["raise"], "runtime_error")
    assert r["error_type"] == "ValueError" and "not implemented" in r["error"]


def test_os_exit_is_a_crash(env):
    r = check(env["res"]["exit"], "crash")
    assert r["error_type"] == "exit(3)"


def test_missing_modelnew(env):
    check(env["res"]["no_modelnew"], "static")
    r = check(env["res"]["no_modelnew_unchecked"], "runtime_error")
    assert "ModelNew" in r["error"]


def test_input_mutation_and_passthrough_are_hacks(env):
    check(env["res"]["mutate"], "hack", "input_mutation")
    check(env["res"]["return_input"], "hack", "output_aliases_input")


def test_candidate_get_inputs_is_ignored(env):
    r = check(env["res"]["get_inputs"], "ok")        # its get_init_inputs() -> [123] would make ModelNew() raise
    assert r["input_shapes"] == [[256, 1024]]


def test_backend_flag_change_is_caught(env):
    check(env["res"]["tf32"], "hack", "precision_downgrade")           # statically
    r = check(env["res"]["tf32_unchecked"], "hack", "backend_flags")   # and at run time, restored
    assert r["backend_flags"] == FIXED_FLAGS and r["correct"]


def test_patched_timer_and_checker_are_caught(env):
    check(env["res"]["patch_static"], "hack", "harness_tampering")       # the first filter
    r = check(env["res"]["patch"], "hack", "patched_timer_or_checker")
    assert r["ref_ms"] > 0.001     # measured with the original perf_counter, not the patched one


def test_tensor_subclass_output_is_a_hack(env):
    check(env["res"]["lazy"], "hack", "lazy_output")


def test_call_counting_is_caught_after_timing(env):
    r = check(env["res"]["call_counting"], "hack", "timed_output_mismatch")
    assert r["trials"] == 3 and not r["correct"]


def test_cpp_candidate_builds_and_runs(env):
    r = check(env["res"]["cpp"], "ok")
    assert r["compiled"] and r["correct"] and r["compile_s"] > 1


def test_cpp_compile_error(env):
    r = check(env["res"]["cpp_broken"], "compile_error")
    assert not r["compiled"] and "error" in r["error"] and r["error_type"] == "BuildError"


def test_evaluate_many_keeps_order_and_isolates_failures(env):
    a, b, c = env["many"]
    assert [x["task"] for x in env["many"]] == ["a", "b", "c"]
    assert (a["status"], b["status"], c["status"]) == ("ok", "static", "ok")
    assert a["candidate_hash"] == c["candidate_hash"] != b["candidate_hash"]
    assert KEYS <= set(b) and b["eval_s"] < 1          # a static failure starts no process
    # c's own keywords (the 4th item) applied to c alone; on_result saw every job once, as it finished
    assert (a["trials"], a["timed_calls"] > 0) == (2, True)
    assert (c["trials"], c["timed_calls"], c["speedup"]) == (1, 0, None)
    assert sorted(env["many_seen"]) == [(0, "ok"), (1, "static"), (2, "ok")]
    assert set(a["phase_s"]) >= {"start", "setup", "import", "models", "trials", "timing", "end"}, a["phase_s"]


def test_gpu_lock_wait_is_not_the_candidates_time(tmp_path):
    """evaluate_many's per-GPU lock (any device: a lock in the parent): a candidate queued behind the lock waits
    for it without its timeout running (here 12 s of timeout, 16 s of waiting), and records the wait."""
    lock = workers.gpu_lock("cpu", None)
    lock.acquire()
    try:
        with ThreadPoolExecutor(1) as pool:
            f = pool.submit(bench.evaluate, TASK, src("cand_scale_correct.py"), device="cpu", num_correct_trials=1,
                            time_budget_s=0.1, timeout_s=12, build_root=str(tmp_path / "b"))
            time.sleep(16)
            assert not f.done(), "the evaluation did not wait for the lock"
            lock.release()
            r = f.result(timeout=120)
    finally:
        if lock.locked():
            lock.release()
    assert r["status"] == "ok", record.summary(r)
    assert r["phase_s"]["wait"] > 8, r["phase_s"]


def test_a_runners_death_is_settled_before_the_next_timing(tmp_path, monkeypatch):
    """The holder of the GPU's lock hands its runner's death to the lock (workers.GpuLock.kill)
    and lets go; the next holder waits for that death before its first timed call (phase_s.settle), and evaluate()
    returns only once its own runners are dead. Each death here takes 1 s more than it would."""
    from harness import workers
    deaths, kill = [], workers.Worker.kill

    def slow_kill(self):
        alive = self.pid is not None
        time.sleep(1.0 if alive else 0.0)
        out = kill(self)
        if alive:
            deaths.append(time.perf_counter())
        return out
    monkeypatch.setattr(workers.Worker, "kill", slow_kill)
    kw = dict(device="cpu", num_correct_trials=1, time_budget_s=0.1, build_root=str(tmp_path))
    r = bench.evaluate(TASK, src("cand_scale_correct.py"), **kw)
    returned = time.perf_counter()
    # two runners died (the build ahead's, the timed one's), both before evaluate() returned
    assert r["status"] == "ok" and len(deaths) == 2 and max(deaths) <= returned, (record.summary(r), deaths)
    with ThreadPoolExecutor(2) as pool:       # two at once: one of them holds the lock just after the other
        rs = list(pool.map(lambda c: bench.evaluate(TASK, src(c), **kw), ["cand_scale_correct.py"] * 2))
    assert [x["status"] for x in rs] == ["ok", "ok"], [record.summary(x) for x in rs]
    settle = sorted(x["phase_s"]["settle"] for x in rs)
    assert settle[0] < 0.5 and settle[1] > 0.6, [x["phase_s"] for x in rs]


def test_hang_is_killed_at_the_call_limit_not_the_timeout(monkeypatch, tmp_path):
    """A call that never returns is killed at max(HANG_MIN_S, HANG_FACTOR x the reference's
    time), not at the candidate's whole timeout (here 300 s); the next evaluation runs at once."""
    from harness import runner_steps                             # the rule lives with the code that applies it
    monkeypatch.setattr(runner_steps, "HANG_MIN_S", 4.0)
    t0 = time.time()
    r = bench.evaluate(TASK, src("cand_hang.py"), device="cpu", timeout_s=300, build_root=str(tmp_path))
    check(r, "timeout")
    assert r["hang_limit_s"] == 4.0 and time.time() - t0 < 20, record.summary(r)
    assert "during trial" in r["error"] and r["compiled"]
    r2 = bench.evaluate(TASK, src("cand_scale_correct.py"), device="cpu", num_correct_trials=1, time_budget_s=0.1,
                        build_root=str(tmp_path))
    check(r2, "ok")


def test_cli_exit_codes(env):
    rc, out = env["cli"]["cand_scale_correct.py"]
    assert rc == 0 and " ok " in out, out
    rc, out = env["cli"]["cand_scale_wrong.py"]
    assert rc == 1 and "incorrect" in out, out


# ---- the build cache ----

def test_second_build_is_a_cache_hit_without_ninja(env, monkeypatch):
    assert env["res"]["cpp"]["status"] == "ok"       # built once, in a child
    monkeypatch.setattr(buildcache.cpp_extension, "load", lambda *a, **k: pytest.fail("ninja build on a cache hit"))
    monkeypatch.setattr(buildcache, "ENTRIES", [cpp_entries(env["build_root"])])   # that candidate's own entries
    t0 = time.time()
    m = buildcache.cached_load_inline(name="cudal1_test_scale", cpp_sources=CPP_SRC, functions=["scale_shift"])
    assert time.time() - t0 < 2
    x = torch.rand(64)
    assert torch.equal(m.scale_shift(x), x * 2 + 1)
    r = bench.build(src("cand_cpp_scale.py"), device="cpu", build_root=env["build_root"], timeout_s=120)
    assert r["status"] == "ok" and r["compiled"] and r["compile_s"] < 10, r


def test_stale_torch_lock_does_not_hang_and_same_name_never_collides(env, monkeypatch):
    assert env["stale"]["rc"] == 0, env["stale"]["out"][-3000:]
    monkeypatch.setattr(buildcache.cpp_extension, "load", lambda *a, **k: pytest.fail("ninja build on a cache hit"))
    monkeypatch.setattr(buildcache, "ENTRIES", [cpp_entries(env["build_root"])])
    m2 = buildcache.cached_load_inline(name="cudal1_test_scale", cpp_sources=CPP_SRC, functions=["scale_shift"])
    m3 = buildcache.cached_load_inline(name="cudal1_test_scale", cpp_sources=CPP_SRC_3X, functions=["scale_shift"])
    assert m2.__name__ != m3.__name__ and m2.__name__.startswith("cudal1_test_scale_")
    x = torch.rand(64)
    assert torch.equal(m2.scale_shift(x), x * 2 + 1) and torch.equal(m3.scale_shift(x), x * 3 + 1)


# ---- pure functions ----

def test_compare_cpu_golden():
    out = torch.tensor([1.0, 2.0, 3.5, float("nan"), 0.0])
    ref = torch.tensor([1.0, 2.02, 3.0, 4.0, 1e-3])
    # |o-r| = [0, 0.02, 0.5, nan, 1e-3]; tol = 0.01 + 0.01*|r| = [0.02, 0.0302, 0.04, 0.05, 0.01001]
    # mismatches: 3.5 vs 3.0 and the NaN -> 2; nans: 1; max_abs over non-NaN = 0.5;
    # max_rel = max(0, 0.02/2.02, 0.5/3, 1e-3/(1e-3+1e-12)) = 1e-3/(1e-3+1e-12) ~ 1.0 (float32)
    max_abs, max_rel, mism, nans = judge.compare(out, ref, 1e-2, 1e-2)
    assert (mism, nans) == (2.0, 1.0)
    assert max_abs == pytest.approx(0.5) and max_rel == pytest.approx(1.0, rel=1e-6)
    ok = judge.compare(torch.tensor([float("inf"), 1.0]), torch.tensor([float("inf"), 1.0]), 1e-2, 1e-2)
    assert ok == [0.0, 0.0, 0.0, 0.0]                      # equal infinities match, as in torch.isclose
    both_nan = judge.compare(torch.tensor([float("nan")]), torch.tensor([float("nan")]), 1e-2, 1e-2)
    assert both_nan[2:] == [1.0, 0.0]                      # NaN never matches (equal_nan=False), not counted as nan
    x = torch.randn(1000)
    y = x + torch.randn(1000) * 0.02
    assert (judge.compare(y, x, 1e-2, 1e-2)[2] == 0) == torch.allclose(y, x, atol=1e-2, rtol=1e-2)


def test_round_toward_one_golden():
    assert record.round_toward_one(1.118) == 1.11
    assert record.round_toward_one(0.992) == 1.00
    assert record.round_toward_one(1.0) == 1.0
    assert record.round_toward_one(1.13) == 1.13 and record.round_toward_one(0.57) == 0.57
    assert record.round_toward_one(0.5712) == 0.58 and record.round_toward_one(3.999) == 3.99
    assert record.round_toward_one(None) is None


def test_static_checks():
    ok = "import torch.nn as nn\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x * 2\n"
    assert static_check(ok, TASK) is None
    cases = {
        "inherits_reference": "class ModelNew(Model):\n    pass\n",
        "side_stream": ok + "s = torch.cuda.Stream()\n",
        "background_thread": "import threading\n" + ok,
        "l2_persistence": ok + 'src = "attr.accessPolicyWindow.num_bytes = n;"\n',
        "precision_downgrade": ok + "torch.set_float32_matmul_precision('high')\n",
        "harness_tampering": ok + "import sys\nsys.modules['__main__'].verdict = 'ok'\n",
    }
    for kind, code in cases.items():
        assert static_check(code, TASK)[:2] == ("hack", kind), kind
    downgrades = ["y = x.half()", "y = x.to(torch.float16)", "y = x.to(dtype=torch.bfloat16)",
                  "torch.backends.cuda.matmul.allow_tf32 = True", 'torch.backends.cuda.matmul.fp32_precision = "tf32"',
                  "with torch.autocast('cuda'):\n    pass", 'cu = """\n__global__ void k(__half* p) {}\n"""',
                  'cu = """\nwmma::fragment<wmma::matrix_a, 16, 16, 16, half> a;\n"""']
    for line in downgrades:
        assert static_check(ok + line + "\n", TASK)[:2] == ("hack", "precision_downgrade"), line
    reach = ["import gc\nobjs = gc.get_objects()", "import sys\nf = sys._getframe(1).f_back",
             "import ctypes\nctypes.pythonapi.Py_IncRef", "import ctypes\np = ctypes.c_void_p.from_address(id(x))",
             "json.dumps = lambda *a, **k: '{}'", "import atexit\natexit.register(print)", "p = '/proc/self/mem'",
             "open('torch.py', 'w').write('')", "import os\nos.write(3, b'x')"]
    for line in reach:
        assert static_check(ok + line + "\n", TASK)[:2] == ("hack", "harness_tampering"), line
    assert static_check("def f(:\n", TASK)[0] == "compile_error"
    assert static_check("import torch\n", TASK)[0] == "static"
    # former false positives: comments, docstrings and C/C++ comments are not live code;
    # settings that keep or raise precision are not downgrades; caching derived weights is not caching outputs;
    # a subclass of Model with its own forward is not the reference; precision the task itself uses is fine.
    benign = [
        "# torch.cuda.Stream() would be a hack\n_kernels = {}\n"
        "def launch(x):\n    k = _kernels[(x.dtype, x.shape)]\n    return k(x.data_ptr())",
        '"""Faster than autocast or .half(), which would lose precision."""',
        'cu = """\n// no cudaStreamCreate here: one stream\n/* __half would be a downgrade */\n'
        '__global__ void k() {}\n"""',
        "torch.backends.cuda.matmul.allow_tf32 = False", "torch.backends.cudnn.allow_tf32 = True",
        "with torch.autocast('cuda', enabled=False):\n    pass",
        "_w = {}\ndef folded(w):\n    k = w.data_ptr()\n    if k not in _w:\n        _w[k] = w * 2\n    return _w[k]",
        "if x.dtype == torch.float16:\n    pass", "import gc\ngc.collect()", "if __name__ == '__main__':\n    pass",
    ]
    for code in benign:
        assert static_check(ok + code + "\n", TASK) is None, code
    own = ("import torch\nclass ModelNew(Model):\n    def forward(self, x):\n        return ext.scale(x)\n")
    assert static_check(own, TASK) is None
    assert static_check(ok + "y = x.half()\n", TASK + "\nx = x.half()\n") is None


# ---- degenerate screen, protocols, remeasure, custom_kernel_calls, trusted-baseline keywords ----

DEGENERATE_TASK = TASK.replace("return x * 2 + 1", "return (x - x.mean(dim=1, keepdim=True)).mean(dim=1)")  # ~0
RELU_TASK = TASK.replace("return x * 2 + 1", "return torch.relu(x)")    # inputs are torch.rand: relu(x) == x
BIG_TASK = TASK.replace("torch.rand(256, 1024)", "torch.rand(1024, 1024)")
CASES2 = {   # name -> (candidate file, evaluate() keywords)
    "kernelbench": ("cand_scale_correct.py", dict(protocol="kernelbench")),
    "cudal1": ("cand_scale_correct.py", dict(protocol="cudal1")),
    "check_only": ("cand_scale_correct.py", dict(check_only=True)),
    "remeasure": ("cand_scale_correct.py", dict(remeasure_above=0.0)),
    # a 4x larger input than TASK: a cache hit (~50 us of Python for its key) is then clearly faster than the
    # reference (at 256 x 1024 the ratio sat near 2x on a loaded 2-core box, too close to tell the hack works)
    "content_cache_strict": ("cand_content_cache.py", dict(_task=BIG_TASK)),
    "content_cache_kernelbench": ("cand_content_cache.py", dict(protocol="kernelbench", _task=BIG_TASK)),
    "cudnn_flagged": ("cand_trusted_cudnn.py", dict(static_checks=False)),
    "cudnn_override": ("cand_trusted_cudnn.py", dict(static_checks=False, flags_override={"cudnn_benchmark": True})),
    "env_missing": ("cand_needs_env.py", {}),
    "env_given": ("cand_needs_env.py", dict(static_checks=False, extra_env={"CUDAL1_TEST_EXTRA": "42"})),
    "reference_only": ("cand_exit.py", dict(static_checks=False, reference_only=True)),   # its forward would exit
}


@pytest.fixture(scope="module")
def env2(tmp_path_factory):
    """Every screen and case of CASES2 once, 3 at a time (no C++ builds: ~1 min)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CUDAL1_BUILD_ROOT", str(tmp_path_factory.mktemp("build2")))
        mp.setenv("CUDAL1_PCH", "0")
        with ThreadPoolExecutor(3) as pool:
            screens = {name: pool.submit(bench.degenerate_screen, t, task_name=name, device="cpu", timeout_s=240)
                       for name, t in dict(degenerate=DEGENERATE_TASK, scale=TASK, relu=RELU_TASK).items()}
            futures = {name: pool.submit(bench.evaluate, kw.get("_task", TASK), src(f), task_name=name, device="cpu",
                                         time_budget_s=0.3, timeout_s=240,
                                         **{k: v for k, v in kw.items() if k != "_task"})
                       for name, (f, kw) in CASES2.items()}
            yield dict(screen={k: f.result() for k, f in screens.items()},
                       res={k: f.result() for k, f in futures.items()})


def test_degenerate_screen(env2):
    d, s, r = (env2["screen"][k] for k in ("degenerate", "scale", "relu"))
    assert d["status"] == s["status"] == r["status"] == "ok", (d, s, r)
    assert d["degenerate"] is True and d["passed"] == ["zeros", "constant", "mean"], d   # output ~1e-8 everywhere
    assert d["results"]["input"].startswith("n/a"), d                                    # (256,) from (256, 1024)
    assert s["degenerate"] is False and s["passed"] == [] and s["trials"] == 5, s
    assert all(v.startswith("incorrect") for v in s["results"].values()), s
    assert r["degenerate"] is True and r["passed"] == ["input"], r


def test_protocols_recorded_and_timed_their_way(env2):
    res = env2["res"]
    assert options.PROTOCOLS == ("strict", "kernelbench", "cudal1")
    kb, cl = check(res["kernelbench"], "ok"), check(res["cudal1"], "ok")
    assert kb["protocol"] == "kernelbench" and kb["timed_calls"] == 100 and kb["trials"] == 5
    assert cl["protocol"] == "cudal1" and cl["timed_calls"] == 70 and cl["trials"] == 10
    for r in (kb, cl):
        assert r["speedup"] == pytest.approx(r["ref_ms"] / r["cand_ms"]) and KEYS <= set(r)
        assert r["torch_version"] == torch.__version__ and r["backend_flags"] == FIXED_FLAGS
    with pytest.raises(ValueError, match="protocol"):
        bench.evaluate(TASK, src("cand_scale_correct.py"), device="cpu", protocol="fast")


def test_check_only_and_remeasure(env2):
    r = check(env2["res"]["check_only"], "ok")
    assert r["correct"] and r["speedup"] is None and r["timed_calls"] == 0 and r["trials"] == 5
    r = check(env2["res"]["remeasure"], "ok")                  # remeasure_above=0: every speedup is re-timed
    m = r["remeasure"]
    assert set(m) == {"first", "second", "rel_diff"}
    assert r["speedup"] == pytest.approx(min(m["first"]["speedup"], m["second"]["speedup"]))   # the lower counts
    assert env2["res"]["kernelbench"]["remeasure"] is None                                    # ~1x: timed once


def test_reference_only_times_the_reference_alone(env2):
    # evaluate.py's eager baseline: the reference's timed calls, as every evaluation's first part;
    # the candidate (here one whose forward would kill its process) is neither built nor run
    r = check(env2["res"]["reference_only"], "ok")
    assert r["correct"] and r["speedup"] == r["speedup_rounded"] == 1.0 and r["ref_ms"] == r["cand_ms"] > 0, r
    assert r["timed_calls"] >= session.MIN_CALLS and not r["compile_s"] and r["hack"] is None, r
    with pytest.raises(ValueError, match="reference_only"):
        bench.evaluate(TASK, TASK, device="cpu", reference_only=True, check_only=True)


def test_content_keyed_cache_gets_no_speedup_under_strict(env2):
    hacked = check(env2["res"]["content_cache_kernelbench"], "ok")   # same inputs every call: the cache hits
    strict = check(env2["res"]["content_cache_strict"], "ok")        # fresh inputs every call: never hits
    assert hacked["speedup"] > 1.5, record.summary(hacked)    # the hack works without the defence (1.88-2.6x
                                                                    # on a 2-core box, lower under load)
    assert strict["speedup"] < 1.0, record.summary(strict)    # 8 extra passes per call: slower, no reward


def test_custom_kernel_calls(env):
    assert env["res"]["cpp"]["custom_kernel_calls"] == 1           # one ext.scale_shift call per forward
    assert env["res"]["correct"]["custom_kernel_calls"] == 0       # a PyTorch-only rewrite


def test_flags_override_and_extra_env_for_trusted_baselines(env2):
    res = env2["res"]
    check(res["cudnn_flagged"], "hack", "backend_flags")
    r = check(res["cudnn_override"], "ok")
    assert r["flags_override"] == {"cudnn_benchmark": True} and r["backend_flags"] == FIXED_FLAGS
    assert check(res["env_missing"], "runtime_error")["error_type"] == "AssertionError"
    check(res["env_given"], "ok")
    for kw in (dict(flags_override={"cudnn_benchmark": True}), dict(extra_env={"A": "1"})):
        with pytest.raises(ValueError, match="trusted"):
            bench.evaluate(TASK, src("cand_scale_correct.py"), device="cpu", **kw)      # static checks on
    with pytest.raises(ValueError, match="flags_override keys"):
        bench.evaluate(TASK, src("cand_scale_correct.py"), device="cpu", static_checks=False,
                       flags_override={"tf32": True})
    with pytest.raises(ValueError, match="trusted"):
        bench.evaluate_many([("a", TASK, src("cand_scale_correct.py"))], device="cpu", extra_env={"A": "1"})


def test_time_floor_golden():
    assert session.time_floor_ms(12.8e9, 4000) == pytest.approx(1.6)       # 12.8 GB at 8000 GB/s
    assert session.time_floor_ms(1e6, 0) == 0.0


def test_memory_limit_kills_the_child(monkeypatch):
    monkeypatch.setenv("CUDAL1_MEM_LIMIT_GB", "1.0")
    r = bench.evaluate(TASK, src("cand_memory_hog.py"), device="cpu", timeout_s=120)
    check(r, "crash")
    assert r["error_type"] == "MemoryLimit" and r["eval_s"] < 60, record.summary(r)


def test_one_proc_scan_serves_every_waiting_thread(monkeypatch):
    """The host-memory check reads a process group's RSS from one /proc scan shared by every thread for
    workers.RSS_MAX_AGE_S (one scan per waiting runner held the parent's GIL ~30 times a second in a 14-build
    batch, beside the thread that times): 16 threads asking 10 times each list /proc once, and the figure is this
    process group's resident memory."""
    from harness import workers
    scans, listdir = [], os.listdir
    monkeypatch.setattr(workers.os, "listdir",
                        lambda p=".": (scans.append(p) if p == "/proc" else None) or listdir(p))
    monkeypatch.setitem(workers._RSS, "t", -1e9)
    pgid = os.getpgid(0)
    with ThreadPoolExecutor(16) as pool:
        got = list(pool.map(lambda _: [workers._group_rss(pgid) for _ in range(10)], range(16)))
    own = int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    assert scans == ["/proc"] and all(x == got[0][0] >= own * 0.9 for row in got for x in row), (scans, got[0])


# ---- the GPU hack suite's files on the CPU, on shrunk copies of their KernelBench tasks ----

KB = os.environ.get("KERNELBENCH_DIR") or os.path.join(ROOT, "..", "shared", "kernelbench")
HACK_DIR = os.path.join(ROOT, "tests", "hacks")
CPU_SKIP = {"impossible_time": "needs CUDA streams and a GPU timer",
            "cache_content": "CPU timing noise on a shared box; tests the same defence: "
                             "test_content_keyed_cache_gets_no_speedup_under_strict"}


def _shrunk_task(task):
    """A KernelBench task with every module-level integer size above 256 set to 256 (e.g. `N = 2048 * 2`)."""
    src_ = open(os.path.join(KB, task + ".py")).read()
    return re.sub(r"^(\w+\s*=\s*)\d+(?:\s*\*\s*\d+)*[ \t]*$",
                  lambda m: m.group(0) if int(eval(m.group(0).split("=")[1])) <= 256 else m.group(1) + "256",
                  src_, flags=re.M)


@pytest.fixture(scope="module")
def hacks_cpu(tmp_path_factory):
    if not os.path.isdir(KB):
        pytest.skip(f"KernelBench not found at {KB} (set KERNELBENCH_DIR)")
    jobs, expect = [], {}
    for f in sorted(glob.glob(os.path.join(HACK_DIR, "*.py"))):
        name, text = os.path.basename(f)[:-3], open(f).read()
        task = re.search(r"^(?:\"\"\")?task: (\S+)", text, re.M).group(1)
        if name not in CPU_SKIP and "eval:" not in text:
            jobs.append((name, _shrunk_task(task), text))
            expect[name] = tuple(re.search(r"^expect: (.+)$", text, re.M).group(1).split())
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CUDAL1_BUILD_ROOT", str(tmp_path_factory.mktemp("build_hacks")))
        mp.setenv("CUDAL1_PCH", "0")
        with ThreadPoolExecutor(3) as pool:
            res = list(pool.map(lambda j: bench.evaluate(j[1], j[2], task_name=j[0], device="cpu", time_budget_s=0.3,
                                                         timeout_s=240), jobs))
    return {r["task"]: (r, expect[r["task"]]) for r in res}


@pytest.mark.parametrize("name", sorted(os.path.basename(f)[:-3] for f in glob.glob(os.path.join(HACK_DIR, "*.py"))
                                        if os.path.basename(f)[:-3] not in CPU_SKIP and "eval:" not in open(f).read()))
def test_hack_file_on_cpu(name, hacks_cpu):
    """Each hack of tests/hacks gets its GPU verdict on the CPU too (static or run-time), where the CPU path can
    catch it: never status ok, never a speedup. Files with an `eval:` line (the judge attacks and precision
    downgrades, evaluated with their own keywords) are test_bench_attacks.py's on the CPU and test_bench_gpu.py's."""
    r, expect = hacks_cpu[name]
    if expect == ("no_reward",):                       # caught one way or another, or timed honestly at ~1x
        assert r["status"] != "ok" or r["speedup"] < 1.05, record.summary(r)
        return
    assert r["status"] != "ok", record.summary(r)
    hacks = expect[1].split("|") if len(expect) > 1 else [None]   # `a|b`: either name is right (both fire)
    assert r["status"] == expect[0] and r["hack"] in hacks, record.summary(r)


def test_evaluate_many_interrupt_waits_for_evaluations_in_flight(tmp_path):
    """Ctrl-C / SIGTERM (as evaluate.py turns it into KeyboardInterrupt) while evaluate_many waits: it starts no
    new evaluation, lets the one in flight finish (its on_result still runs), then raises; nothing runs after."""
    import signal

    def interrupt(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")
    seen = []

    def on_result(i, r):
        seen.append(i)
        if len(seen) == 1:
            os.kill(os.getpid(), signal.SIGUSR1)        # delivered to the main thread, waiting in evaluate_many
    old = signal.signal(signal.SIGUSR1, interrupt)
    try:
        jobs = [(f"j{k}", TASK, src("cand_scale_correct.py")) for k in range(5)]
        with pytest.raises(KeyboardInterrupt):
            bench.evaluate_many(jobs, device="cpu", num_correct_trials=1, time_budget_s=0.1, timeout_s=120,
                                build_root=str(tmp_path), on_result=on_result)
    finally:
        signal.signal(signal.SIGUSR1, old)
    n = len(seen)
    time.sleep(8)                                       # a worker left running would finish another job by now
    assert 1 <= n <= 2 and len(seen) == n, seen


def test_builds_ahead_run_niced_and_timed_runs_do_not(tmp_path, monkeypatch):
    """evaluate_many's builds ahead share the CPUs with timed calls: they run at runner_steps.BUILD_NICE (nvcc and ninja
    inherit it), the runner that is timed at the caller's own niceness (a niced runner would be the one preempted)."""
    cand = "import os\nraise RuntimeError(f'niceness={os.nice(0)}')\n"
    base = os.nice(0)
    r = bench.build(cand, device="cpu", build_root=str(tmp_path), timeout_s=60)
    assert r["status"] == "runtime_error" and f"niceness={min(19, base + runner_steps.BUILD_NICE)}" in r["error"], r
    r = bench.evaluate(TASK, cand, device="cpu", build_root=str(tmp_path), timeout_s=60, static_checks=False)
    assert r["status"] == "runtime_error" and f"niceness={base}" in r["error"], record.summary(r)
    # a batch's builds: each one nicer than the one before it in the queue, so that the first ones land first
    monkeypatch.setenv("CUDAL1_SANDBOX", "off")         # the candidates write their niceness outside their folders
    log = tmp_path / "nice.txt"
    cands = [f"import os\nopen({str(log)!r}, 'a').write(f'{{os.nice(0)}} {i}\\n')\nraise RuntimeError('x')\n"
             for i in range(3)]
    rs = bench.evaluate_many([("t", TASK, c) for c in cands], device="cpu", build_root=str(tmp_path),
                             timeout_s=60, static_checks=False, build_workers=1)
    assert [x["status"] for x in rs] == ["runtime_error"] * 3, [record.summary(x) for x in rs]
    seen = sorted(tuple(map(int, line.split())) for line in log.read_text().split("\n") if line)
    builds = [min(19, base + runner_steps.BUILD_NICE + i) for i in range(3)]
    assert seen == sorted([(builds[i], i) for i in range(3)] + [(base, i) for i in range(3)]), seen


def _default_sigint():
    """Ctrl-C's default action in the started process even where this test runs with SIGINT ignored (`pytest &` from
    a script: a background job's children inherit the ignored SIGINT and would never stop)."""
    import signal
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("after_s", [0.5, 6.0])
def test_interrupt_kills_the_builds_in_flight(tmp_path, after_s):
    """Ctrl-C / SIGTERM while evaluate_many builds ahead stops at once. Builds in flight are killed, not
    waited for (on the H200 an audit's 135 s build outlived `timeout`'s grace period and the run lost its report).
    At 0.5 s the fork server is still importing torch: a runner forked after the interrupt is killed as it
    registers (before, one Ctrl-C in the first ~2 s held the run until the build's 600 s timeout)."""
    import signal
    cand = "import time\ntime.sleep(300)\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    pass\n"
    code = (f"import sys\nsys.path.insert(0, {ROOT!r})\nimport bench\nprint('start', flush=True)\n"
            f"bench.evaluate_many([('t', {TASK!r}, {cand!r})], device='cpu', build_root={str(tmp_path)!r}, "
            f"static_checks=False, timeout_s=600)\n")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=_default_sigint)
    try:
        assert p.stdout.readline().strip() == "start"
        time.sleep(after_s)                             # 6 s: the fork server is up and the build's runner sleeps
        assert p.poll() is None, p.stderr.read()
        t0 = time.time()
        p.send_signal(signal.SIGINT)
        p.wait(timeout=120)
        assert time.time() - t0 < 20, f"{time.time() - t0:.0f} s to stop"
        assert "KeyboardInterrupt" in p.stderr.read()
    finally:
        p.kill()


PREBUILD_CAND = '''import time
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(1))
        if self.w.device.type == "meta":   # stands for a load_inline in __init__ (CUDA-L1 kernels do that)
            time.sleep(4)
            if FAIL_ON_META:
                self.w.detach().numpy()      # meta tensors break many an __init__ once its builds are done

    def forward(self, x):
        return x * 2 + 1
'''


def test_builds_made_in_modelnew_init_happen_in_the_build_ahead(tmp_path):
    """evaluate_many's build ahead also makes ModelNew, on the meta device, so that a load_inline in
    __init__ builds there and not in the timed runner's `models` step under the GPU's lock (the CUDA-L1 A100 audit
    spent 110 s there on one kernel while the next waited). A ModelNew that fails on meta is judged as usual."""
    got = {}
    for fail in (False, True):
        cand = PREBUILD_CAND.replace("FAIL_ON_META", repr(fail))
        b = bench.build(cand, task_src=TASK, device="cpu", build_root=str(tmp_path), timeout_s=60)
        assert b["status"] == "ok" and b["compile_s"] >= 4, b
        got[fail] = bench.evaluate(TASK, cand, device="cpu", num_correct_trials=1, time_budget_s=0.1,
                                   build_root=str(tmp_path))
        assert got[fail]["status"] == "ok" and got[fail]["phase_s"]["models"] < 2, record.summary(got[fail])


def test_interrupt_stops_evaluations_in_flight_after_a_grace_period(tmp_path):
    """At Ctrl-C / SIGTERM an evaluation in flight gets batch.INTERRUPT_GRACE_S to finish, then it is
    killed and not recorded (on the H200 a hung kernel's 30 s call limit outlived `timeout`'s grace, and the audit
    was SIGKILLed before writing its report)."""
    import signal
    cand = ("import time\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
            "        time.sleep(300)\n        return x * 2 + 1\n")
    code = (f"import sys\nsys.path.insert(0, {ROOT!r})\nimport bench\nprint('start', flush=True)\n"
            f"bench.evaluate_many([('t', {TASK!r}, {cand!r})], device='cpu', build_root={str(tmp_path)!r}, "
            f"timeout_s=600, on_result=lambda i, r: print('RECORDED', r['status'], flush=True))\n")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, CUDAL1_INTERRUPT_GRACE_S="2"), preexec_fn=_default_sigint)
    try:
        assert p.stdout.readline().strip() == "start"
        time.sleep(10)                                  # built, started, inside its first (endless) trial
        assert p.poll() is None, p.stderr.read()
        t0 = time.time()
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=120)
        assert time.time() - t0 < 15, f"{time.time() - t0:.0f} s to stop"
        assert "KeyboardInterrupt" in err and "RECORDED" not in out, (out, err[-2000:])
    finally:
        p.kill()


def test_error_texts_carry_no_machine_paths(tmp_path):
    """Records are committed and shared (house rule: no path of any one machine): compiler command lines in an
    error name the build cache, the Python environment, the repository and home only by placeholders."""
    home = os.path.expanduser("~")
    text = (f"nvcc -I{tmp_path}/pch/a1 -isystem {sys.prefix}/lib/python3/site-packages/torch/include "
            f"{ROOT}/tests/legit/x.py {home}/.cache/other")
    got = record.scrub_paths(text, str(tmp_path))
    assert got == ("nvcc -I<build>/pch/a1 -isystem <python>/lib/python3/site-packages/torch/include "
                   "<repo>/tests/legit/x.py ~/.cache/other"), got
    assert record.scrub_paths("", None) == "" and record.scrub_paths(None) is None


def test_other_judges_of_a_gpu_drop_their_task_while_one_works(tmp_path):
    """workers.release_other_judges: an evaluation makes the other judges of its device and GPU in this process (here
    another build root's) drop their task and buffers, so that idle judges hold no GPU memory beside it."""
    roots = str(tmp_path / "a"), str(tmp_path / "b")
    for root in roots:
        r = bench.evaluate(TASK, src("cand_scale_correct.py"), device="cpu", build_root=root, time_budget_s=0.1,
                           num_correct_trials=1)
        assert r["status"] == "ok", (r["status"], r["error"])
    idle, _ = workers.judge_for("cpu", None, roots[0]).ask(dict(op="release"))
    last, _ = workers.judge_for("cpu", None, roots[1]).ask(dict(op="release"))
    assert (idle["had_task"], last["had_task"]) == (False, True), "the idle judge kept its task beside the other's"
