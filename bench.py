"""bench.py: the evaluator. It builds a candidate `ModelNew`, checks it against a KernelBench reference `Model` and
times both, and returns one flat result record (a dict) that no candidate code ever touched.

    python bench.py TASK.py CANDIDATE.py [--device cuda|cpu] [--protocol strict] [--json]

A task is a KernelBench module (`Model`, `get_inputs()`, `get_init_inputs()`); a candidate is a module defining
`ModelNew` with the same constructor, usually building CUDA with `torch.utils.cpp_extension.load_inline`.
API: evaluate (one candidate), evaluate_many (parallel builds; each job checked and timed as soon as its build is
done, one job per GPU at a time), build, degenerate_screen (REFERENCE.md §3), static_check, round_toward_one.

Three processes, three files (issue 11; gpu-mode's pygpubench showed the way: the trust boundary is the architecture):
  bench.py  (this process, the caller's) starts a fork server that imported torch once (a candidate process starts
            in ~0.05 s instead of ~3-5 s, issue 12 item 3), asks it for workers, sends them commands, and puts
            the record together: verdict, speedup, hack kind (one evaluation's steps and rules: session.py). It
            never imports a candidate.
  judge.py  one trusted worker per GPU: the reference, its outputs (float32 and float64) for inputs it makes from the
            seeds, the comparisons, the precision measurement and the degenerate screen. No candidate code and no
            build-cache extension is ever loaded there.
  runner.py one fresh worker per candidate, never reused: imports (builds) the candidate, runs the calls the parent
            asks for, reports raw times and writes outputs into the judge's buffer. Untrusted once the candidate
            is imported: its reports are measurements to check, never verdicts. Once the candidate's runner is
            dead, a second fresh runner whose "candidate" is the task's Model times the reference.
The parent reveals each timed call's seed only when it asks for that call and times every call with its own clock
(wall time on a GPU; on the CPU device the runner's CPU time from the kernel's accounting, and there the
candidate's counted time is never below that clock less the reference's overhead and a noise allowance); the
reference is timed the same way, in a runner of its own, which calibrates the fixed overhead (per side, the least
overhead on a GPU, the median on the CPU device; limits WALL_ABS_MS, WALL_REL, WALL_OVER). A candidate whose claimed
times that clock contradicts is the hack `clock_mismatch`:
a runner patched to report 40x for a plain torch.sigmoid still spends the real time on the parent's clock. Every
call delivers its output with a checksum before it replies, and the judge checks every trial and one random timed
call per round. Candidate processes are killed, with their whole process tree (the fork server is their
subreaper), before the reference is timed.
What is NOT defended: native code in a candidate process can do anything the user can (write files, including
this repository and the build cache; signal other processes; read other processes' memory as root). A container
or VM per candidate (read-only code, no network, its own PID namespace) would close that; see the README.

Protocols (PROTOCOLS; issue 6 item 5, issue 12 item 1) differ only in trial counts and in how a call is timed
(runner.Clock); every protocol runs every check.
  "strict" (default): 5 correctness trials; 3 warm-ups; 5 rounds of n calls (n so the candidate's timed calls take
    about time_budget_s, 3..20); FRESH seeded inputs for every call; L2 flushed before every call; device time with
    launch latency hidden and leftover work on any stream charged (runner.py's docstring); statistic = median.
  "kernelbench" (REFERENCE.md §2, KernelBench at HEAD): 5 trials; 3 warm-ups, 1 discarded + 100 timed calls on the
    SAME inputs, L2 flush, current-stream events; statistic = mean.
  "cudal1" (§1.7, CUDA-L1's released script): 10 trials; 3 warm-ups; 7 rounds x 10 calls on fresh inputs, device
    sync inside the window, no flush; statistic = mean of round means. The reference is timed after
    the candidate (no paired trials across processes), so our "cudal1" reproduces its timing rule, not its pairing.
Checks: static_check (live code only, a first filter); in the judge: every correctness trial and one random timed
call of every round (the runner cannot know which) against the reference on the same seed (structure, shape,
dtype, isclose, precision); the runner's first-filter reports (exact torch.Tensor type, storage, aliasing,
mutated inputs, backend flags, patched timer functions, caught build failures); the parent's clock;
the physical floor (impossible_time); speedups above remeasure_above (3x) timed twice, the lower counts (§1.3).

Result record (flat, JSON-serialisable): task, candidate_hash, status (ok | static | compile_error | runtime_error |
incorrect | timeout | crash | hack), compiled, correct, speedup (ref_ms / cand_ms, unrounded, only when correct),
speedup_rounded (toward 1.00 at two decimals, as CUDA-L1), ref_ms, cand_ms (the protocol's statistic, ms per call),
error (for a failed build: the first compiler error), error_type, hack (named kind), max_abs_err, max_rel_err,
mismatches, nans, trials, timed_calls, protocol, device, device_name, torch_version, cuda_version, backend_flags,
compile_s, eval_s, phase_s (wall s: start, import, models, wait, setup, trials, timing, end (the runner handed to
its kill), settle (waiting for earlier runners' deaths before a timed call: forkserver.GpuLock), reference and its
parts ref_setup, ref_calls), input_shapes,
custom_kernel_calls (calls into load_inline/load extensions during the first trial; 0 = PyTorch-only; None =
unknown), floor_ms, remeasure, flags_override, precision ({err, ref_err, half_err, threshold} of the worst checked
output, judge.py), clock ({excess_ms, overhead_ms, limit_ms, claimed_ms, kind}: the parent's clock check),
degenerate (trivial outputs that pass this task's check, [] none, None unknown), hang_limit_s, exchange (ipc | file:
how outputs reach the judge), fp32_reference_off ({mismatches, max_rel_err, where}: the output failed isclose
against the fp32 reference but is as close to the float64 truth as that reference is, so it counts as correct;
judge.mismatches_vs64). `status` is the verdict (reward only "ok").
"""
import argparse, contextlib, json, os, shutil, sys, tempfile, threading, time
from concurrent.futures import ThreadPoolExecutor

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:          # the fork server runs with `python -P` (no script folder first on sys.path)
    sys.path.append(HERE)
from harness import judge  # noqa: E402
from harness import runner  # noqa: E402
from harness.forkserver import WorkerError, judge_for, gpu_lock  # noqa: E402
from harness import buildcache  # noqa: E402
from harness import cores  # noqa: E402
from harness.buildcache import cached_load_inline  # noqa: E402,F401 (public re-export)
from harness.runner import FIXED_FLAGS, set_flags, get_flags  # noqa: E402,F401 (public re-exports)
from harness.scan import static_check  # noqa: E402,F401
from harness.session import (WARMUP, ROUNDS, MIN_CALLS, MAX_CALLS, HANG_MIN_S, HANG_FACTOR, WALL_REL,  # noqa: E402,F401
                     WALL_ABS_MS, WALL_OVER, PREBUILD_MAX_S, BUILD_NICE, MEM_LIMIT_GB, _hash, round_toward_one,
                     time_floor_ms, _Session)   # (the rules live with the code that applies them; re-exported)

PROTOCOLS = ("strict", "kernelbench", "cudal1")
PROTOCOL_TRIALS = dict(strict=5, kernelbench=5, cudal1=10)     # default num_correct_trials per protocol
SPLIT_UNITS = 3                         # compilers a split build runs at once (main.cpp, glue.cpp, cuda.cu): split_builds
INTERRUPT_GRACE_S = 5.0                 # at Ctrl-C / SIGTERM, evaluations in flight get this long to finish
                                        # (10 s made `timeout -k 10` kill evaluate.py before its report, H200)
compare_cpu = judge.compare             # the comparison rule (kept under its old name)


# ---------------------------------------------------------------------------------------------------- records

def _blank_result(task_name, candidate_src, protocol, device):
    return dict(task=task_name, candidate_hash=_hash(candidate_src), status="crash", compiled=False, correct=False,
                speedup=None, speedup_rounded=None, ref_ms=None, cand_ms=None, error="", error_type="", hack=None,
                max_abs_err=None, max_rel_err=None, mismatches=None, nans=None, trials=0, timed_calls=0,
                protocol=protocol, device=device, device_name="cpu" if device == "cpu" else None,
                torch_version=torch.__version__, cuda_version=torch.version.cuda, backend_flags=dict(FIXED_FLAGS),
                compile_s=None, eval_s=None, phase_s={}, input_shapes=None, custom_kernel_calls=None,
                floor_ms=None, remeasure=None, flags_override=None, precision=None, clock=None, degenerate=None,
                hang_limit_s=None, exchange=None, fp32_reference_off=None)


def result_summary(res):
    """One line for humans: task, hash, verdict, speedup and times (ms), first line of the error."""
    s = f"{res.get('task', '?')} [{res.get('candidate_hash', '?')}] {res.get('status')}"
    if res.get("hack"):
        s += f" ({res['hack']})"
    if res.get("speedup") is not None:
        s += f" speedup {res['speedup']:.3f}x"
    if res.get("ref_ms") is not None and res.get("cand_ms") is not None:
        s += f" (ref {res['ref_ms']:.4g} ms, cand {res['cand_ms']:.4g} ms, {res.get('timed_calls')} calls)"
    if res.get("degenerate"):
        s += f" [degenerate task: {', '.join(res['degenerate'])} passes its check]"
    if res.get("mismatches"):
        s += f" mismatches {res['mismatches']} nans {res.get('nans')} max_abs_err {res.get('max_abs_err') or 0:.3g}"
    if res.get("error"):
        msg, kind = (str(res["error"]).strip().splitlines() or [""])[0], str(res.get("error_type") or "")
        s += " | " + (msg if not kind or msg.startswith(kind) else f"{kind}: {msg}")[:160]
    return s


# -------------------------------------------------------------------------------------------------- the API

def _options(device="cuda", protocol="strict", atol=1e-2, rtol=1e-2, num_correct_trials=None, timeout_s=300.0,
             arch=None, build_root=None, static_checks=True, time_budget_s=2.0, remeasure_above=3.0,
             check_only=False, flags_override=None, extra_env=None, reference_only=False):
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {PROTOCOLS}, not {protocol!r}")
    if (flags_override or extra_env) and static_checks:
        raise ValueError("flags_override and extra_env are for trusted baselines only: pass static_checks=False")
    bad = set(flags_override or {}) - set(FIXED_FLAGS)
    if bad:
        raise ValueError(f"flags_override keys must be among {sorted(FIXED_FLAGS)}, not {sorted(bad)}")
    if device not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cuda' or 'cpu', not {device!r}")
    if reference_only and check_only:
        raise ValueError("reference_only times the reference; check_only times nothing: pass one of them")
    return dict(device=device, protocol=protocol, atol=atol, rtol=rtol, timeout_s=float(timeout_s), arch=arch,
                trials=num_correct_trials or PROTOCOL_TRIALS[protocol], static_checks=static_checks,
                build_root=os.path.abspath(build_root) if build_root else runner.default_build_root(),
                time_budget_s=time_budget_s, remeasure_above=remeasure_above, check_only=check_only,
                flags_override=dict(flags_override) if flags_override else None, extra_env=extra_env,
                reference_only=reference_only)


def _build_ahead(task_src, candidate_src, o, live=None, split=True, place=0):
    """The candidate's builds made in a throw-away runner (import, then ModelNew on the meta device), so that the
    timed runner, which imports it under the GPU's lock after its reference is timed (session._Session.reference),
    finds them in the cache. split=False: not as the split build (split_builds). place: its place in a batch's
    queue of builds, added to its niceness (BUILD_NICE, at most 19)."""
    bo = dict(o, build_only=True, timeout_s=max(600.0, o["timeout_s"]), static_checks=False,
              build_nice=min(19, BUILD_NICE + max(0, int(place))))
    if not split:                                   # (extra_env is for trusted callers: this one is ours)
        bo["extra_env"] = dict(o["extra_env"] or {}, CUDAL1_SPLIT="0")
    return _evaluate("build", task_src, candidate_src, bo, live=live)


def _evaluate(task_name, task_src, candidate_src, o, gpu=None, live=None, built=False):
    """One candidate's record; built: its builds were made ahead (evaluate_many), else a timed evaluation makes
    them first, here (a failed build is the verdict)."""
    t0 = time.perf_counter()
    res = _blank_result(task_name, candidate_src, o["protocol"], o["device"])
    res["flags_override"] = o["flags_override"]
    verdict = static_check(candidate_src, task_src) if o["static_checks"] else None
    b = None if verdict or built or o.get("build_only") or o["check_only"] or o["reference_only"] else \
        _build_ahead(task_src, candidate_src, o, live)
    if verdict:
        res.update(status=verdict[0], hack=verdict[1], error=verdict[2],
                   error_type="SyntaxError" if verdict[0] == "compile_error" else "StaticCheck")
    elif b and b["status"] in ("compile_error", "timeout"):
        res.update({k: b.get(k) for k in ("status", "error", "error_type", "compile_s")})
    else:
        try:
            jw = None if o.get("build_only") else judge_for(o["device"], gpu, o["build_root"])
            _Session(res, task_src, candidate_src, o, gpu, gpu_lock(o["device"], gpu), jw, live).run()
        except Exception as e:                            # e.g. the fork server or the judge could not start
            res.update(status="crash", error=runner.truncate(f"evaluator error: {type(e).__name__}: {e}"),
                       error_type=type(e).__name__)
        if b and b.get("compile_s"):                      # the builds made here count as this record's
            res["compile_s"] = b["compile_s"] + (res.get("compile_s") or 0.0)
    res["error"] = scrub_paths(res["error"], o["build_root"])
    res["eval_s"] = time.perf_counter() - t0
    return res


def scrub_paths(text, build_root=None):
    """An error text without this machine's paths (compiler command lines name the build cache, the Python
    environment, home): records are committed and shared. Longest first: <build>, <python>, <repo>, <tmp>, ~."""
    if not text:
        return text
    here = os.path.dirname(os.path.abspath(__file__))
    subs = [(build_root or runner.default_build_root(), "<build>"), (sys.prefix, "<python>"),
            (sys.base_prefix, "<python>"), (here, "<repo>"), (tempfile.gettempdir(), "<tmp>"),
            (os.path.expanduser("~"), "~")]
    for path, tag in sorted(subs, key=lambda x: -len(x[0] or "")):
        if path and len(path) > 1:
            text = text.replace(path.rstrip("/"), tag)
    return text


def evaluate(task_src: str, candidate_src: str, *, task_name: str = "task", device: str = "cuda",
             protocol: str = "strict", atol: float = 1e-2, rtol: float = 1e-2, num_correct_trials: int | None = None,
             timeout_s: float = 300.0, arch: str | None = None, build_root: str | None = None,
             static_checks: bool = True, time_budget_s: float = 2.0, remeasure_above: float = 3.0,
             check_only: bool = False, flags_override: dict | None = None, extra_env: dict | None = None,
             reference_only: bool = False, _gpu: str | None = None) -> dict:
    """Builds, checks and times one candidate against its task; returns the result record (module docstring).

    protocol: one of PROTOCOLS; atol/rtol: isclose tolerances (KernelBench's published results: 1e-2);
    num_correct_trials: None = the protocol's (5, 5, 10); timeout_s: wall seconds for the whole evaluation, build
    included, waiting for the GPU not included (a single call is also limited to max(30 s, 100x the reference's
    time)); arch: TORCH_CUDA_ARCH_LIST for the candidate's nvcc builds; time_budget_s: seconds the strict
    protocol's timed calls of the candidate should take; remeasure_above: speedups above it are timed twice and the
    lower counts (CUDA-L1 §1.3); check_only: correctness only, no timing; static_checks=False for trusted
    baselines, which may also pass flags_override (backend flags, keys of FIXED_FLAGS, in force during the
    candidate's own code; the reference keeps FIXED_FLAGS) and extra_env (variables for the candidate's process,
    e.g. a shared TORCHINDUCTOR_CACHE_DIR); reference_only: the reference's timed calls alone, as the first part of
    any evaluation times them (ref_ms = cand_ms, speedup 1.0; the candidate is neither built nor imported:
    evaluate.py's eager baseline, issue 12 item 4). Raises ValueError for a bad argument; never raises for a bad
    candidate.
    """
    o = _options(device, protocol, atol, rtol, num_correct_trials, timeout_s, arch, build_root, static_checks,
                 time_budget_s, remeasure_above, check_only, flags_override, extra_env, reference_only)
    return _evaluate(task_name, task_src, candidate_src, o, _gpu)


def degenerate_screen(task_src: str, *, task_name: str = "task", device: str = "cuda", atol: float = 1e-2,
                      rtol: float = 1e-2, num_correct_trials: int = 5, timeout_s: float = 600.0,
                      build_root: str | None = None, arch: str | None = None) -> dict:
    """REFERENCE.md §3 (issue 6 item 3): does a trivial output pass this task's correctness check?

    In the judge: the reference on the seeds of the correctness trials, and each of judge.TRIVIAL_OUTPUTS (zeros;
    constant = the reference's output on other inputs; mean = its mean everywhere; input = the first input
    reshaped) through the same comparison a candidate gets. Cached per task source. Returns {task, degenerate
    (bool; None if the screen itself failed), passed, results ({name: "passed" | "incorrect: ..." | "n/a: ..."}),
    status (ok | runtime_error | crash), error, trials, atol, rtol, device, device_name, eval_s}."""
    t0 = time.perf_counter()
    res = dict(task=task_name, degenerate=None, passed=[], results={}, status="crash", error="", error_type="",
               trials=0, atol=atol, rtol=rtol, device=device, device_name="cpu" if device == "cpu" else None)
    o = _options(device, "strict", atol, rtol, num_correct_trials, timeout_s, arch, build_root)
    tmp = tempfile.mkdtemp(prefix="cudal1_screen_")
    try:
        path = os.path.join(tmp, "task.py")
        with open(path, "w") as f:
            f.write(task_src)
        jw = judge_for(device, None, o["build_root"])
        key = _hash(task_src) + _hash(json.dumps([device, "strict", num_correct_trials, atol, rtol]))
        with gpu_lock(device, None):
            info, _ = jw.ask(dict(op="setup", task_key=key, task_src=task_src, atol=atol, rtol=rtol,
                                  trials=num_correct_trials, protocol="strict", screen=True), timeout_s)
        res.update(status="ok", results=info["screen"], trials=len(info["seeds"]),
                   device_name=info.get("device_name", res["device_name"]))
        res["passed"] = [k for k, v in info["screen"].items() if v == "passed"]
        res["degenerate"] = bool(res["passed"])
    except (RuntimeError, WorkerError) as e:
        res.update(status="runtime_error", error=runner.truncate(str(e)), error_type=type(e).__name__)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    res["eval_s"] = time.perf_counter() - t0
    return res


def build(candidate_src, *, task_src="", device="cuda", arch=None, build_root=None, timeout_s=600.0) -> dict:
    """Build only: imports the candidate in a runner (its load_inline calls fill the build cache) and, given the
    task's source, makes ModelNew(*get_init_inputs()) on the meta device (builds made in __init__), then ends it.
    Returns {candidate_hash, status (ok | compile_error | runtime_error | timeout | crash), compiled, error,
    error_type, compile_s (s)}; runtime_error means the import failed for a reason other than a build."""
    o = dict(_options(device, build_root=build_root, arch=arch, timeout_s=timeout_s, static_checks=False),
             build_only=True)
    r = _evaluate("build", task_src, candidate_src, o)
    return {k: r.get(k) for k in ("candidate_hash", "status", "compiled", "error", "error_type", "compile_s")}


def _prebuild_wanted(device, sources):
    """Whether evaluate_many makes main.cpp's precompiled header before its builds: on a GPU (CPU runs are tests and
    demos, whose few builds would compete with it on 2 cores), unless CUDAL1_PCH=0, when a candidate to build may
    call load_inline."""
    return device == "cuda" and os.environ.get("CUDAL1_PCH", "1") != "0" and \
        any("load_inline" in s or "cpp_extension" in s for s in sources)


def _prebuild_pch(root, build_cpus, split=True):
    """buildcache.prebuild_pch on the build cores (a thread of the parent; gcc inherits the thread's affinity), never
    raising: without the header the builds are slower, not wrong. split: the split build's two headers too."""
    with contextlib.suppress(Exception), cores.pinned(build_cpus):
        buildcache.prebuild_pch(root, with_cuda=True, split=split)


def _warm_judge(device, gpu, o):
    """The judge of `gpu` started, its CUDA context, clock and copy bandwidth made (judge.py warm), under the GPU's
    lock; never raising (the first evaluation would make them itself). A thread of evaluate_many."""
    with contextlib.suppress(Exception):
        jw = judge_for(device, gpu, o["build_root"])
        with gpu_lock(device, gpu):
            jw.ask(dict(op="warm", protocol=o["protocol"]), 120.0)


def split_builds(n_builds, workers):
    """Whether a batch's builds may be split (buildcache: main.cpp and glue.cpp side by side beside cuda.cu, three
    compilers per build): only while they cannot fill the build cores, SPLIT_UNITS x n_builds <= workers, unless
    CUDAL1_SPLIT is set. A split build is faster alone (a fresh one-kernel build 2.9-3.4 s against 4.0-5.1 s as one
    file on an H200 box's 16 cores) and no faster in a crowd, where its second unit is only more work: on one H200
    box, 64 builds on 14 workers had 48 (split) and 49 (one file) evaluations done at 57 s, and the split build's
    two more headers took their making from 29.8 to 47.4 s (issue 12 item 4; results/bench/2026-12-02_s14/call4_*).
    False: the batch's build runners get CUDAL1_SPLIT=0 and its prebuilt header is the light one alone."""
    return os.environ.get("CUDAL1_SPLIT", "auto") != "auto" or SPLIT_UNITS * n_builds <= workers


class _Live:
    """The runners of one evaluate_many's builds (or evaluations) in flight, for an interrupt to kill. Once closed, a
    runner that registers is killed at once: it was being forked (the fork server itself may still have been
    starting) while the others were killed, and would otherwise hold the interrupted run until its timeout."""

    def __init__(self):
        self.workers, self.closed, self.lock = set(), False, threading.Lock()

    def add(self, w):
        with self.lock:
            if not self.closed:
                self.workers.add(w)
                return
        w.kill()

    def discard(self, w):
        with self.lock:
            self.workers.discard(w)

    def close(self):
        with self.lock:
            self.closed, workers, self.workers = True, list(self.workers), set()
        for w in workers:
            w.kill()


def cpu_count():
    """CPUs this process may run on (its affinity mask, e.g. under taskset or a container's cpuset)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def evaluate_many(jobs, *, build_workers=None, progress=False, gpus=None, overlap=True, on_result=None,
                  per_gpu=2, **kw):
    """evaluate() for [(task_name, task_src, candidate_src[, overrides]), ...]; results in the same order.

    Builds every distinct candidate ahead, `build_workers` at a time (default: the CPU count less 2 per GPU when
    overlapping, so the timed jobs keep CPUs of their own), in throw-away runners that fill the build cache; then
    evaluates each job on one of `gpus` (CUDA_VISIBLE_DEVICES ids; default every visible GPU for device="cuda"):
    `per_gpu` jobs per GPU are alive at once, but only one at a time holds the GPU's lock for its checks and
    timing, so the next one's start (fork, import, build) overlaps the current one's GPU work. overlap=True
    starts a job as soon as its own build is done (issue 6 item 7: RL should not wait for the slowest compile);
    overlap=False waits for every build. overrides: a dict of evaluate() keywords for that job only.
    on_result(i, result) is called as each job finishes (from a worker thread). A candidate whose build failed or
    timed out is not built again. One job's failure never stops the others. Ctrl-C / SIGTERM: no new evaluation
    starts, builds in flight are killed, evaluations in flight get INTERRUPT_GRACE_S (env CUDAL1_INTERRUPT_GRACE_S)
    to finish (their results reach on_result), the rest are killed and not recorded, then the interrupt goes on.
    """
    began = time.perf_counter()
    jobs = [tuple(j) + ({},) if len(j) == 3 else tuple(j) for j in jobs]
    grace = float(os.environ.get("CUDAL1_INTERRUPT_GRACE_S", INTERRUPT_GRACE_S))
    opts = []
    for j in jobs:                                        # a wrong keyword fails here, not once per job
        jkw = dict(kw, **j[3])
        jkw.pop("_gpu", None)
        opts.append(_options(**jkw))
    device = kw.get("device", "cuda")
    if gpus is None:
        seen = os.environ.get("CUDA_VISIBLE_DEVICES")
        n = torch.cuda.device_count() if device == "cuda" else 0
        gpus = [g.strip() for g in seen.split(",") if g.strip()][:n] if seen else [str(i) for i in range(n)]
    slots = list(gpus) or [None]
    say = (lambda msg: print(f"[bench] {msg}", file=sys.stderr, flush=True)) if progress else (lambda msg: None)
    todo = {}
    for (_, task_src, cand_src, _), o in zip(jobs, opts):
        if not (o["static_checks"] and static_check(cand_src, task_src)) and not o["reference_only"]:
            todo.setdefault(_hash(cand_src), (cand_src, o, task_src))
    workers = build_workers or max(1, cpu_count() - (2 * len(slots) if overlap else 0))
    split_ok = split_builds(len(todo), workers)
    if _prebuild_wanted(device, [src for src, _, _ in todo.values()]):
        root = opts[0]["build_root"]                      # main.cpp's precompiled header first, at normal priority
        split = cores.core_split("cuda", slots[0])        # (read here: core_split caches the main thread's cores)
        threading.Thread(target=_prebuild_pch, args=(root, split[1] if split else None, split_ok),
                         daemon=True).start()
    timed = [o for o in opts if not o["check_only"]]
    if device == "cuda" and timed:                        # the judges' CUDA context and clock while builds run
        for g in slots:
            threading.Thread(target=_warm_judge, args=(device, g, timed[0]), daemon=True).start()
    bpool = ThreadPoolExecutor(max(1, min(workers, len(todo) or 1)))
    done, building = [0], _Live()                         # building: the runners of builds in flight
    evaluating, stopped = _Live(), threading.Event()      # the runners of evaluations in flight; set at a stop

    def build_one(place, h, src, o, task_src):
        began_at = time.perf_counter()
        r = _build_ahead(task_src, src, o, live=building, split=split_ok, place=place)
        done[0] += 1
        if r["status"] != "ok" or (r.get("compile_s") or 0) >= 0.05:   # not for candidates with nothing to build
            ps = r.get("phase_s") or {}
            say(f"build {done[0]}/{len(todo)} {h} {r['status']} {r.get('compile_s') or 0:.1f} s at "
                f"{time.perf_counter() - began:.1f} s (began at {began_at - began:.1f} s: process start "
                f"{ps.get('start', 0):.2f} s, import {ps.get('import', 0):.1f} s, in all {r.get('eval_s') or 0:.1f} s; "
                f"niceness {min(19, BUILD_NICE + place)})")
        return r
    # In queue order, each one nicer than the last (_build_ahead's place): 14 builds sharing 14 cores evenly all
    # landed together, 13-15 s into a 64-candidate batch, while the GPU waited (results/bench/2026-12-02_s14)
    builds = {h: bpool.submit(build_one, i, h, *v) for i, (h, v) in enumerate(todo.items())}
    if not overlap:
        for f in builds.values():
            f.result()
    results = [None] * len(jobs)

    def one(i, g):
        name, task_src, cand_src, _ = jobs[i]
        b = builds[_hash(cand_src)].result() if _hash(cand_src) in builds else None
        if b and b["status"] in ("compile_error", "timeout"):
            r = _blank_result(name, cand_src, opts[i]["protocol"], opts[i]["device"])
            r.update({k: b.get(k) for k in ("status", "error", "error_type", "compile_s")}, eval_s=0.0)
        else:
            r = _evaluate(name, task_src, cand_src, opts[i], g, live=evaluating, built=b is not None)
        if stopped.is_set():                              # killed by the interrupt below: not a verdict
            return
        results[i] = r
        if on_result is not None:
            on_result(i, r)
        say(f"eval {i + 1}/{len(jobs)}{'' if g is None else f' gpu {g}'} {result_summary(r)}")

    hashes = [_hash(j[2]) for j in jobs]

    def in_build_order():                                 # job indices as their builds finish
        waiting = list(range(len(jobs)))
        while waiting:
            for i in [i for i in waiting if hashes[i] not in builds or builds[hashes[i]].done()]:
                waiting.remove(i)
                yield i
            time.sleep(0.02)

    # The main thread hands out the jobs (so an interrupt, which Python delivers to it, stops the hand-out at
    # once); each GPU takes up to per_gpu jobs at a time, and its lock lets one of them at a time check and time.
    # On the CPU device the "GPU" is the CPU itself: a second job's start would share it with a timing.
    free, cond = {g: 1 if device == "cpu" else max(1, per_gpu) for g in slots}, threading.Condition()

    def run(i, g):
        try:
            one(i, g)
        finally:
            with cond:
                free[g] += 1
                cond.notify_all()
    pool, futures = ThreadPoolExecutor(sum(free.values())), []
    try:
        for i in in_build_order():
            with cond:
                while not any(free.values()):
                    cond.wait()
                g = max(slots, key=lambda s_: free[s_])
                free[g] -= 1
            futures.append(pool.submit(run, i, g))
        for f in futures:
            f.result()
    except BaseException:
        bpool.shutdown(wait=False, cancel_futures=True)   # Ctrl-C / SIGTERM: no build is waited for (one took
        building.close()                                  # 135 s on the H200, past `timeout`'s grace period)
        end = time.monotonic() + grace                    # evaluations in flight may finish within the grace
        for f in futures:                                 # period (their results reach on_result); nothing new
            with contextlib.suppress(BaseException):      # starts; then the rest are killed, unrecorded (a hung
                f.result(timeout=max(0.0, end - time.monotonic()))   # one would hold `timeout` past its grace)
        stopped.set()
        evaluating.close()
        raise
    finally:
        pool.shutdown(wait=True)
        bpool.shutdown(wait=True, cancel_futures=True)
    return results


def main(argv=None):
    ap = argparse.ArgumentParser(description="Check and time a KernelBench candidate against its task.")
    ap.add_argument("task", help="task module (Model, get_inputs, get_init_inputs)")
    ap.add_argument("candidate", help="candidate module (ModelNew)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", choices=["cuda", "cpu"],
                    help="where both models run (default: cuda where torch sees a GPU, else cpu)")
    ap.add_argument("--arch", default=None, help="TORCH_CUDA_ARCH_LIST for nvcc, e.g. 9.0")
    ap.add_argument("--json", action="store_true", help="print the whole result record as JSON")
    ap.add_argument("--timeout_s", type=float, default=300.0, help="seconds for the whole evaluation")
    ap.add_argument("--trials", type=int, default=None, help="correctness trials (default: the protocol's)")
    ap.add_argument("--no_static_checks", action="store_true", help="for trusted code only")
    ap.add_argument("--build_root", default=None, help="build cache (default $CUDAL1_BUILD_ROOT or ~/.cache/cudal1/build)")
    ap.add_argument("--protocol", default="strict", choices=PROTOCOLS,
                    help="timing protocol: strict (fresh inputs every call, L2 flushed, median), kernelbench "
                         "(100 calls on the same inputs, mean), cudal1 (7 rounds x 10 calls, no flush, mean of "
                         "round means)")
    ap.add_argument("--check_only", action="store_true", help="correctness only, no timing")
    a = ap.parse_args(argv)
    missing = [f"{role} {p}" for role, p in (("task", a.task), ("candidate", a.candidate)) if not os.path.isfile(p)]
    if missing:
        sys.exit(f"error: no such file: {'; '.join(missing)} (usage: python bench.py TASK.py CANDIDATE.py)")
    if a.device == "cuda" and not torch.cuda.is_available():
        sys.exit("error: --device cuda but torch sees no CUDA GPU (a CPU build of torch, or no driver); use --device cpu")
    res = evaluate(open(a.task).read(), open(a.candidate).read(), task_name=os.path.basename(a.task)[:-3],
                   device=a.device, arch=a.arch, timeout_s=a.timeout_s, num_correct_trials=a.trials,
                   static_checks=not a.no_static_checks, build_root=a.build_root, protocol=a.protocol,
                   check_only=a.check_only)
    print(json.dumps(res) if a.json else result_summary(res))
    return 0 if res["status"] == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
