"""bench.py against adversarial candidates, on the CPU (REFERENCE.md §4b, §4c).

Every case runs in ONE bench.evaluate_many (a module fixture; no C++ builds; ~1.5-2 min on a shared 2-core box):
  - each judge attack of tests/hacks/judge_*.py that needs no GPU, with its `eval:` keywords (static checks off: the
    process split is what is tested). Those whose forgery is a claimed time, and the detached chain, run on
    tests/fixtures/cpu_task_matmul.py (level1/1 at N = 1024, ~35 ms of work per call for the parent's clock to find
    and for a burner to slow down); the others on level1/1 shrunk (N = 256);
  - two attacks of tests/fixtures: NaN claims arranged so that the medians pick a forged time
    (cand_clock_nan_median.py) and a forged screen cache on a degenerate task (cand_forge_screen_cache.py);
  - a control: the reference's own op, nothing else (cand_plain_matmul.py), on the heavy task;
  - the precision downgrades a CPU can run (fp16, bf16) on shrunk tasks, static checks off, check_only;
  - the former false positives of the source scan that a CPU can run (new files of tests/legit), static checks
    ON, check_only (correctness and precision; timing is not what they test).
Then: no attack is rewarded (each file's `expect:`; on the CPU "no_reward" = not ok, or a speedup under CPU_NO_REWARD,
above the noise of an honest ~1x op on this box and far below the 40x the forgeries claim); no detached process
survives its evaluation; scan.static_check (a first filter) flags every attack file and no legitimate file.
"""
import glob
import importlib.util
import json
import math
import os
import re
import signal
import subprocess
import sys
import tempfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(ROOT, "tests", "fixtures")
HACKS = os.path.join(ROOT, "tests", "hacks")
LEGIT = os.path.join(ROOT, "tests", "legit")
KB = os.environ.get("KERNELBENCH_DIR") or os.path.join(ROOT, "..", "shared", "kernelbench")
sys.path.insert(0, ROOT)
import bench  # noqa: E402
from harness import record  # noqa: E402
from harness.scan import static_check  # noqa: E402

_spec = importlib.util.spec_from_file_location("precision_calibration",
                                               os.path.join(ROOT, "scripts", "precision_calibration.py"))
pc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pc)                 # shrink_task, header, runs_on_cpu: the same rules as the calibration

CPU_NO_REWARD = 2.0          # an honest ~1x op measures 0.6-1.1x here alone, and read 1.53x once beside another
                             # test worker (judge_task_rewrite: ref 0.71 vs cand 0.46 ms of CPU time);
                             # every forgery in these files claims ~40x (task_rewrite's sleep would read ~140x)
HEAVY = open(os.path.join(FIX, "cpu_task_matmul.py")).read()
HEAVY_ATTACKS = {"judge_clock_nan",                               # besides those that expect clock_mismatch:
                 "judge_detached_chain"}     # its burners slow a 35 ms reference measurably, a 0.5 ms one hardly
OWN_TASK = {"judge_task_rewrite"}     # it rewrites its task file: a task source of its own, so the judge loads it
NEW_LEGIT = ["autocast_disabled", "cuda_comment_stream", "cudnn_tf32_default", "docstring_autocast_half",
             "fold_multiplier_cached", "modelnew_subclass_kernel", "tf32_off", "channels_last_output"]
NOT_STATIC = {"judge_cuda_graph_replay": "a CUDA graph is a legitimate optimisation; fresh inputs catch a stale replay"}
BURNER = "cudal1-detached-burner"    # in the command lines of judge_detached_*.py's burners and links


def src(path):
    return open(path).read()


def expect_of(text):
    """(status, hack) or "no_reward" from a file's `expect:` line."""
    e = pc.header(text)[1].split()
    return "no_reward" if e[0] == "no_reward" else (e[0], e[1] if len(e) > 1 else None)


def hacks_of(expect):
    """The hack names an expectation accepts: `a|b` in an `expect:` line means either (both fire)."""
    return [] if expect == "no_reward" else expect[1].split("|") if expect[1] else [None]


def eval_kw(text):
    m = re.search(r"^eval: (.+)$", text, re.M)
    items = (i.split("=") for i in (m.group(1).split() if m else []))
    return {k: {"False": False, "True": True}.get(v, v) for k, v in items}


def kb_task(task, shrink=True):
    text = open(os.path.join(KB, task + ".py")).read()
    return pc.shrink_task(text, 256, pc.CPU_CAPS) if shrink else text


def attack_files():
    return sorted(glob.glob(os.path.join(HACKS, "judge_*.py")))


def cpu_attacks():
    return [os.path.basename(f)[:-3] for f in attack_files() if pc.runs_on_cpu(src(f))]


def precision_cpu():
    """The precision files a CPU can run whose expectation is the run-time flag (precision_conv_fp16 is, by policy,
    no downgrade: PyTorch lets cuDNN convolutions use 10-bit-mantissa TF32 operands; judge.PREC_HALF_CONV)."""
    return [os.path.basename(f)[:-3] for f in sorted(glob.glob(os.path.join(HACKS, "precision_*.py")))
            if pc.runs_on_cpu(src(f)) and expect_of(src(f)) == ("hack", "precision_downgrade")]


def legit_cpu():
    return [n for n in NEW_LEGIT if pc.runs_on_cpu(src(os.path.join(LEGIT, n + ".py")))]


def _survivors(*markers):
    """Pids of live processes whose command line holds every one of `markers`."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit() and int(d) != os.getpid():
            try:
                cmd = open(f"/proc/{d}/cmdline", "rb").read().decode(errors="replace")
                state = open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if all(m in cmd for m in markers) and state != "Z":
                out.append(int(d))
    return out


def _fresh_screen(task_src, root, build_root):
    """bench.degenerate_screen of task_src (2 trials, as evaluated) in a fresh process (a fresh judge, what
    prepare.py or evaluate.py would start later) on the same build root: what the on-disk screen cache says."""
    path = os.path.join(str(root), "screened_task.py")
    with open(path, "w") as f:
        f.write(task_src)
    code = (f"import json, sys; sys.path.insert(0, {ROOT!r}); import bench; r = bench.degenerate_screen(open({path!r})"
            f".read(), device='cpu', num_correct_trials=2, timeout_s=300); print('SCREEN' + json.dumps(r))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, CUDAL1_BUILD_ROOT=build_root, CUDAL1_PCH="0"))
    assert "SCREEN" in p.stdout, p.stdout[-2000:] + p.stderr[-3000:]
    return json.loads(p.stdout.split("SCREEN", 1)[1])


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    if not os.path.isdir(KB):
        pytest.skip(f"KernelBench not found at {KB} (set KERNELBENCH_DIR)")
    jobs = [("control_plain_matmul", HEAVY, src(os.path.join(FIX, "cand_plain_matmul.py")), {})]
    for name in cpu_attacks():
        text = src(os.path.join(HACKS, name + ".py"))
        heavy = name in HEAVY_ATTACKS or "clock_mismatch" in hacks_of(expect_of(text))
        task = HEAVY if heavy else kb_task(pc.header(text)[0])
        if name in OWN_TASK:
            task += f"\n# the task of {name} alone\n"
        jobs.append((name, task, text, eval_kw(text)))
    jobs.append(("nan_median", HEAVY, src(os.path.join(FIX, "cand_clock_nan_median.py")), dict(static_checks=False)))
    softmax = kb_task("level1/23_Softmax")                # degenerate: all zeros pass at 1e-2
    jobs.append(("screen_cache", softmax, src(os.path.join(FIX, "cand_forge_screen_cache.py")),
                 dict(static_checks=False)))
    for name in precision_cpu():                      # check_only: precision is measured in the trials
        text = src(os.path.join(HACKS, name + ".py"))
        jobs.append((name, kb_task(pc.header(text)[0]), text, dict(eval_kw(text), check_only=True)))
    for name in legit_cpu():
        text = src(os.path.join(LEGIT, name + ".py"))
        jobs.append(("legit_" + name, kb_task(pc.header(text)[0]), text, dict(check_only=True)))
    root = tmp_path_factory.mktemp("attacks")      # the judge's screen cache goes next to the build root, and the
    build_root = str(root / "build")                # sessions' folders (in a burner's command line) under root
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CUDAL1_BUILD_ROOT", build_root)
        mp.setenv("CUDAL1_PCH", "0")
        mp.setattr(tempfile, "tempdir", str(root))
        res = bench.evaluate_many(jobs, device="cpu", build_root=build_root, num_correct_trials=2,
                                  time_budget_s=0.1, timeout_s=300)
        out = {j[0]: r for j, r in zip(jobs, res)}
        survivors = _survivors(BURNER, str(root))
        escaped = sorted(os.path.basename(p) for p in glob.glob(os.path.join(str(root), BURNER + "-*")))
        for pid in survivors:                            # clean up what a failed defence left running
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        screen = _fresh_screen(softmax, root, build_root)
    for name, r in sorted(out.items()):
        print(f"ATTACK {name:<32} {record.summary(r)} clock={r.get('clock')}")
    print(f"ATTACK survivors={survivors} escaped={escaped}")
    return dict(res=out, survivors=survivors, escaped=escaped, screen=screen)


def check_no_reward(r, expect):
    s = record.summary(r)
    if expect == "no_reward":
        assert r["status"] != "ok" or (r["speedup"] is not None and r["speedup"] < CPU_NO_REWARD), s
    else:
        assert r["status"] != "ok", s
        assert r["status"] == expect[0] and r["hack"] in hacks_of(expect), s


# ---- the judge attacks (tests/hacks/judge_*.py) ----

@pytest.mark.parametrize("name", cpu_attacks())
def test_judge_attack_gets_no_reward(name, results):
    """The attack's own `expect:` on the CPU: forged records, patched harness functions, forged frames, poisoned
    expected outputs, shadow modules, detached burners and a rewritten task file all leave the verdict alone."""
    check_no_reward(results["res"][name], expect_of(src(os.path.join(HACKS, name + ".py"))))


def test_gpu_only_attacks_are_the_known_ones():
    """Every judge_*.py not run here needs CUDA or a GPU's clock (so the GPU suite, test_bench_gpu.py, is where it is
    tested): the CUDA graph replay, and the 1.4x clock shave, which the CPU device's noise hides (its docstring)."""
    gpu_only = {os.path.basename(f)[:-3] for f in attack_files()} - set(cpu_attacks())
    assert gpu_only == {"judge_cuda_graph_replay", "judge_clock_shave"}, gpu_only
    assert len(attack_files()) >= 12


def test_control_plain_op_is_ok(results):
    """The reference's own op without any forgery, on the heavy task, is correct, ok and ~1x: the attacks' verdicts
    come from their attacks, not from the task or the clock."""
    r = results["res"]["control_plain_matmul"]
    assert r["status"] == "ok" and r["correct"], record.summary(r)
    assert 0.4 < r["speedup"] < CPU_NO_REWARD, record.summary(r)


def test_nan_claims_cannot_pick_a_forged_median(results):
    """NaN claimed times, a NaN between every two forged ones: Python's sort leaves such lists as they are, so the
    claims' median is a forged time and the clock's median excess is NaN (`NaN > limit` is False). A claimed time
    must be finite and positive (judge_clock_nan.py: all NaN, a NaN speedup)."""
    r = results["res"]["nan_median"]
    check_no_reward(r, "no_reward")
    assert r["cand_ms"] is None or math.isfinite(r["cand_ms"]), record.summary(r)


def test_no_detached_process_survives(results):
    """The burners of judge_detached_slowdown.py (double fork + setsid, Popen(start_new_session=True)) and of
    judge_detached_chain.py (40 links, each in its own session) die with their runner, before the reference is
    timed: none is alive once evaluate_many has returned, and no burner left its note that it outlived its
    runner (`cudal1-detached-burner-PID` next to the build root)."""
    assert results["survivors"] == [], f"burners still running after their evaluation: {results['survivors']}"
    assert results["escaped"] == [], f"burners that outlived their runner: {results['escaped']}"


def test_forged_screen_cache_does_not_hide_a_degenerate_task(results):
    """A record on a task whose check a trivial output passes says so. level1/23_Softmax (shrunk)
    accepts all zeros; the candidate returns zeros and poisons the judge's on-disk screen cache (entries written
    in advance, and a thread that overwrites each new one) with "nothing passes". Its record, and a later
    degenerate_screen in a fresh process (what prepare.py and evaluate.py run), must still name the degenerate
    outputs: the judge must not trust a file a candidate can write."""
    r = results["res"]["screen_cache"]
    assert r["status"] != "ok", record.summary(r)
    assert r["degenerate"] and "zeros" in r["degenerate"], record.summary(r)
    screen = results["screen"]
    assert screen["status"] == "ok" and screen["degenerate"] is True and "zeros" in screen["passed"], screen


# ---- precision downgrades (REFERENCE.md §4c) that a CPU can run ----

@pytest.mark.parametrize("name", precision_cpu())
def test_precision_downgrade_is_caught_on_cpu(name, results):
    r = results["res"][name]
    assert (r["status"], r["hack"]) == ("hack", "precision_downgrade"), record.summary(r)
    p = r["precision"]
    assert p["err"] > p["threshold"] > 0 and p["err"] > 4 * p["ref_err"], p


# ---- former false positives of the source scan (tests/legit) ----

@pytest.mark.parametrize("name", legit_cpu())
def test_former_false_positive_is_ok_on_cpu(name, results):
    r = results["res"]["legit_" + name]
    assert r["status"] == "ok" and r["correct"], record.summary(r)
    p = r["precision"]
    assert p and p["err"] <= p["threshold"], p


def test_legit_files_cover_the_false_positives_of_issue_11():
    """Each former false positive has its file, and the CUDA ones are left to the GPU suite."""
    assert sorted(n for n in NEW_LEGIT if os.path.exists(os.path.join(LEGIT, n + ".py"))) == sorted(NEW_LEGIT)
    assert set(NEW_LEGIT) - set(legit_cpu()) == {"cuda_comment_stream", "modelnew_subclass_kernel"}


# ---- the source scan, a first filter (no evaluation) ----

@pytest.mark.parametrize("path", [f for f in attack_files() if os.path.basename(f)[:-3] not in NOT_STATIC] +
                         sorted(glob.glob(os.path.join(HACKS, "precision_*.py"))) +
                         [os.path.join(FIX, f) for f in ("cand_clock_nan_median.py", "cand_forge_screen_cache.py")],
                         ids=os.path.basename)
def test_static_scan_flags_attack(path):
    """scan.static_check flags every attack file (the first filter; the run-time defence is tested above)."""
    text = src(path)
    task = pc.header(text)[0]
    verdict = static_check(text, kb_task(task, shrink=False) if task else "")
    assert verdict is not None and verdict[0] == "hack", f"not flagged by the source scan: {os.path.basename(path)}"
    # the kind it is flagged as: 16-bit or TF32 settings for the precision files, reaching for the harness for the rest
    kind = "precision_downgrade" if os.path.basename(path).startswith("precision_") else \
        "background_thread" if os.path.basename(path) == "judge_helper_thread.py" else "harness_tampering"
    assert verdict[1] == kind, (os.path.basename(path), verdict)


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(LEGIT, "*.py"))), ids=os.path.basename)
def test_static_scan_passes_legit_file(path):
    """No legitimate kernel is flagged (docstrings, comments, settings that keep precision,
    ModelNew(Model) with its own forward, derived weights cached by data_ptr)."""
    text = src(path)
    task = pc.header(text)[0]
    assert static_check(text, kb_task(task, shrink=False)) is None, static_check(text, kb_task(task, False))
