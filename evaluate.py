"""
Evaluate kernels (or only the baselines) on KernelBench tasks and report them the way CUDA-L1 does (arXiv 2507.14111;
REFERENCE.md §1.5, §2; issue 5).

Per task, speedup = t_ref / t_method: the median time of the eager reference `Model` over that of the candidate
`ModelNew`, both timed by bench.evaluate on one device under one protocol, after bench has checked the outputs
(atol = rtol = 1e-2, the tolerance of all published KernelBench and CUDA-L1 numbers) and screened the candidate for the
reward hacks of REFERENCE.md §4. A kernel that breaks the answer format, fails to build, crashes, times out, is wrong
or is flagged as a hack is a failure, and so is a task with no kernel at all. The kernels come from either
  --kernels=FILE  JSON lines, each this project's {"task", "code"[, "ref_code"]} or a line of the CUDA-L1 release
                  (level_id, task_id, ref_code, custom_code, score_*: §1.6). A line with its own ref_code is timed
                  against it (CUDA-L1 used the 2025 "v0" task sizes); its published score_* go into the per-task
                  record next to our measurement. Several lines for one task are samples (best of N), or
  --model=NAME    num_samples answers per task to common.py's stage-1 or contrastive prompt; best of N by speedup,
  or neither      baselines only: the table of the baselines themselves on this GPU (issue 5 item 5).

Baselines (the paper's comparison table) are TRUSTED modules generated from the reference source, timed by bench
against the same eager reference with static checks off: eager (the reference, 1.0x by definition; its time is the
median ref_ms of the task's other runs), compile (torch.compile), compile_reduce_overhead, cuda_graph (generic
capture of the reference forward on static buffers), cudnn_benchmark (the reference run with
torch.backends.cudnn.benchmark on, through bench's flags_override: only the candidate side gets the flag). Rows
"K vs B" divide the kernel's speedup by B's, task by task (= t_B / t_kernel, CUDA-L1's "speedup over torch.compile").

torch.compile takes tens of seconds per task, and every bench child has a private TMPDIR (a cold inductor cache), so
the compile baselines are first compiled in `compile_workers` parallel processes into one shared inductor/Triton
cache (`inductor_cache`; each worker imports the task, builds the baseline like bench does: same seed, backend
flags, no_grad, device; and calls it twice); bench then times them one at a time with that cache (extra_env), so
its child mostly loads compiled code. Tasks are measured in chunks, levels interleaved, so that a run stopped early
(Ctrl-C, SIGTERM from `timeout`) covers every level; each row is appended to results.jsonl as soon as it is
measured, a rerun skips the rows it holds, and --summarize_only=True only rebuilds the report.

Statistics (summarize): the paper's headline mean counts a failed task as 1.0x (the reference is kept); also the mean
over successful tasks only, median / geometric mean / max / p25 / p50 / p75 with the same padding, the number of tasks
> 1.01x (the paper's second headline number) and KernelBench's fast_p = share of ALL tasks of a level that are correct
AND faster than p x, strictly (fast_0 = correctness rate). Every table is repeated without the degenerate tasks
(REFERENCE.md §3): a task is degenerate if its tasks_file row says so (prepare.py's screen), else by bench's
degenerate_screen (screen_degenerate, for tasks that carry their own reference), else, for KernelBench level 1-3
names, by the list of the H200 scan in REFERENCE.md §3 (DEGENERATE_H200); otherwise unknown, and the table says so.
For the kernels: how many correct kernels called a custom (load_inline) kernel during bench's first correctness trial
(bench's custom_kernel_calls > 0) vs PyTorch-only rewrites (== 0), and the hacks bench named, by kind.

Departures, so that nobody compares the wrong numbers:
  - CUDA-L1's released evaluator averages 7 rounds of paired trials (§1.7); bench reports medians under its own
    protocol. Published score_* are carried for comparison, never mixed into our statistics.
  - cuda_graph is one generic capture for every task, not CUDA-L1's per-task `cuda_graph_code` rewrite; it and
    compile_reduce_overhead return a copy of the graph's output (a replay overwrites it): one device copy per call.
  - "K vs B" is a ratio of two speedups from separate runs, each against its own timing of the reference. Where B
    failed on a task, the kernel is compared with eager there (what a user without B would run).
  - The warm-up workers share the GPU while they compile, so Triton's autotuning of pointwise/reduction configs
    (default mode) may pick a different config than an idle GPU would. With overlap_warmup (default) the next
    chunk's warm-up runs while this chunk is timed: its compiles load the CPUs and make short GPU calls during the
    timing (the strict protocol's interleaved rounds and median damp that; --overlap_warmup=False times alone).
    Timed jobs run one per GPU at a time on every visible GPU (bench.evaluate_many).
  - "Measured" are the tasks with a row for every method. A partial run (stopped early) reports each method over
    the tasks it has rows for, and "K vs B" over the tasks both have, saying how many each method misses.

Outputs in eval_dir (default out_dir/eval): results.jsonl (a row per (task, method)), runs.jsonl (command, date,
commit, Triton version of every measuring run), summary.json, summary.md (the tables, also printed, with the
commands and versions), per_task.csv (every per-task number), speedup_sorted.png, speedup_vs_baselines.png, and
with --model samples.jsonl (every completion). E.g.
  python evaluate.py --kernelbench_dir=$KERNELBENCH_DIR --baselines=eager,compile,compile_reduce_overhead,cuda_graph
  python evaluate.py --kernels=a100.jsonl --baselines=eager,compile,compile_reduce_overhead,cuda_graph,cudnn_benchmark
  python evaluate.py --model=out/rl/ckpt --split=eval --num_samples=4
"""
import collections
import csv
import itertools
import json
import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from tqdm import tqdm

import common

# -----------------------------------------------------------------------------
# config: --key=value overrides any of these (common.configure)
kernels = ""                    # kernels file (this project's rows or the CUDA-L1 release format)
model = ""                      # HF name or local folder: generate the kernels instead; neither = baselines only
tasks_file = ""                 # prepare.py's task set ({"name", "level", "src", "split"} rows); "" = out_dir/tasks.jsonl
kernelbench_dir = ""            # or read KernelBench's level*/*.py directly (no train/eval split); "" without --kernels
                                # and tasks_file: $KERNELBENCH_DIR, else ../shared/kernelbench if it exists
levels = "1,2,3"
split = "all"                   # train | eval | all
task_names = ""                 # comma list of task names; overrides levels and split
prompt = "stage1"               # stage1 | contrastive (exemplars: the top-2 kernels by speedup in db_file)
db_file = ""                    # {task_name: [{"code", "speedup", "step"}, ...]}; "" = out_dir/rl/db.json (rl.py's)
num_samples = 1                 # best of N by measured speedup among the correct samples
max_new_tokens = 2048
temperature = 0.7
baselines = "eager,compile"     # from: eager, compile, compile_reduce_overhead, cuda_graph, cudnn_benchmark
device = "cuda"
gpu = "h200"                    # --gpu=NAME applies common.GPU_PRESETS[NAME] (device, arch, gpu_name)
arch = "9.0"                    # nvcc arch for bench's builds
gpu_name = "NVIDIA H200"        # the GPU named in the prompt
protocol = "strict"             # bench's timing protocol
out_dir = "out"                 # the run folder of the other stages
eval_dir = ""                   # where results go; "" = out_dir/eval
atol = 1e-2
rtol = 1e-2
timeout_s = 300.0               # per candidate, in bench
num_correct_trials = 0          # bench's correctness trials; 0 = the protocol's
time_budget_s = 2.0             # bench: seconds the timed calls of one model should take
build_workers = 0               # parallel builds in bench.evaluate_many; 0 = its default (CPUs less 2 per GPU)
compile_workers = 8             # parallel processes that warm the inductor cache for the compile baselines; 0 = off
inductor_cache = ""             # shared TORCHINDUCTOR_CACHE_DIR; "" = ~/.cache/cudal1/inductor
chunk_tasks = 0                 # tasks per measuring chunk; 0 = 16 (kernels), one wave of warm-ups (baselines)
overlap_warmup = True           # warm the next chunk's compile baselines while this chunk is timed (see Departures)
screen_degenerate = "auto"      # auto (on for CUDA) | True | False: bench.degenerate_screen where the status is unknown
summarize_only = False          # only rebuild the report from results.jsonl; measures nothing
# -----------------------------------------------------------------------------

BASELINES = ("eager", "compile", "compile_reduce_overhead", "cuda_graph", "cudnn_benchmark")
COMPILED = ("compile", "compile_reduce_overhead")
FAST_P = (0, 1, 1.5, 2)
PUBLISHED = {"eager": "score_default", "compile": "score_torch_compile_default", "cuda_graph": "score_cuda_graph",
             "compile_reduce_overhead": "score_torch_compile_reduce_overhead", "cudnn_benchmark": "score_cudnn"}
# REFERENCE.md §3: the 47 KernelBench L1-L3 tasks (by level and problem id) whose check a trivial output (zeros, a
# constant, the input) passes at 1e-2, from the H200 scan of the KernelBench snapshot this project uses.
DEGENERATE_H200 = {1: {4, 6, 19, 20, 23, 31, 32, 37, 39, 49, 53, 95, 99, 100},
                   2: {8, 9, 10, 23, 36, 38, 42, 44, 45, 49, 51, 56, 58, 64, 65, 66, 67, 80, 83, 89, 91, 96, 99},
                   3: {3, 5, 7, 11, 12, 18, 28, 35, 46, 47}}


def good(s):
    """A measured speedup that can enter the statistics: a finite positive number."""
    return isinstance(s, (int, float)) and math.isfinite(s) and s > 0


def summarize(speedups):
    """Statistics of one method on one set of tasks. speedups: one entry per task, None for a failed task.

    A failure counts as 1.0x everywhere except mean_success (the mean over successful tasks only). Percentiles use
    linear interpolation between order statistics (numpy's default). An entry that is not a finite positive number
    counts as a failure. fast_p: share of all tasks with a speedup strictly greater than p (KernelBench).
    """
    ok = [float(s) for s in speedups if good(s)]
    n = len(speedups)
    padded = ok + [1.0] * (n - len(ok))
    out = dict(tasks=n, successes=len(ok), mean=None, mean_success=None, median=None, geomean=None, max=None,
               p25=None, p50=None, p75=None, count_gt_1_01=sum(s > 1.01 for s in ok))
    out.update({f"fast_{p}": (sum(s > p for s in ok) / n if n else None) for p in FAST_P})
    if n:
        p25, p50, p75 = np.percentile(padded, [25, 50, 75]).tolist()
        out.update(mean=sum(padded) / n, median=p50, geomean=math.exp(sum(map(math.log, padded)) / n),
                   max=max(padded), p25=p25, p50=p50, p75=p75)
    if ok:
        out["mean_success"] = sum(ok) / len(ok)
    return out


# the paper's layout (CUDA-L1 Table 3: mean, max, 75%, 50%, 25%, successes, > 1.01x), then the extra statistics
COLUMNS = [("mean", "mean"), ("max", "max"), ("p75", "p75"), ("p50", "p50"), ("p25", "p25"), ("ok", "successes"),
           (">1.01x", "count_gt_1_01"), ("mean ok", "mean_success"), ("geomean", "geomean")] + \
          [(f"fast_{p}", f"fast_{p}") for p in FAST_P]


def markdown_table(entries):
    """The report: one row per (method, level) dict holding summarize()'s keys plus "method" and "level". Counts
    are printed out of the level's tasks ("249/250"), speedups (x) and fast_p shares with two decimals."""
    def fmt(k, e):
        v = e[k]
        return f"{v}/{e['tasks']}" if k in ("successes", "count_gt_1_01") else "-" if v is None else f"{v:.2f}"
    lines = ["| method | level | " + " | ".join(c for c, _ in COLUMNS) + " |", "|---|---|" + "---:|" * len(COLUMNS)]
    lines += [f"| {e['method']} | {e['level']} | " + " | ".join(fmt(k, e) for _, k in COLUMNS) + " |" for e in entries]
    return "\n".join(lines) + "\n"


def level_of(name):
    m = re.match(r"level(\d+)/", name)
    return int(m.group(1)) if m else None


def task_id_of(name):
    m = re.match(r"(\d+)(_|$)", name.rsplit("/", 1)[-1])
    return int(m.group(1)) if m else None


def read_kernels(path):
    """Rows {task, level, task_id, code, ref_code, published} of a kernels file; code is None where a line holds no
    kernel (CUDA-L1's null or "None"). The two formats are told apart per line. CUDA-L1 lines are named
    "level{L}/{task_id}" until match_tasks gives them the task set's name ("level1/25_Swish")."""
    rows = []
    for n, r in enumerate(common.read_jsonl(path), 1):
        if "level_id" in r and "task_id" in r:
            row = dict(task=f"level{r['level_id']}/{r['task_id']}", level=int(r["level_id"]), task_id=int(r["task_id"]),
                       code=r.get("custom_code"), ref_code=r.get("ref_code"),
                       published={k: v for k, v in r.items() if k.startswith("score_")})
        elif "task" in r:
            row = dict(task=r["task"], level=level_of(r["task"]), task_id=task_id_of(r["task"]), code=r.get("code"),
                       ref_code=r.get("ref_code"), published={})
        else:
            raise ValueError(f"{path}:{n}: neither {{'task', 'code'}} nor a CUDA-L1 line (level_id, task_id)")
        if not isinstance(row["code"], str) or row["code"].strip() in ("", "None", "null"):
            row["code"] = None
        rows.append(row)
    return rows


def match_tasks(krows, tasks):
    """Rename kernel rows named "level{L}/{id}" to the task set's name with that level and KernelBench id."""
    names = {t["name"] for t in tasks}
    by_id = {(t["level"], task_id_of(t["name"])): t["name"] for t in tasks}
    for k in krows:
        if k["task"] not in names and (k["level"], k["task_id"]) in by_id:
            k["task"] = by_id[(k["level"], k["task_id"])]
    return krows


def load_tasks(tasks_file, kernelbench_dir):
    """Task rows {name, level, src, split}: prepare.py's file when it exists, else the task files of a KernelBench
    folder (prepare.load_tasks; no split), else None."""
    if tasks_file and os.path.exists(tasks_file):
        return common.read_jsonl(tasks_file)
    if kernelbench_dir:
        import prepare
        try:
            rows = prepare.load_tasks(kernelbench_dir, [int(x) for x in str(levels).split(",") if x], [])
        except ValueError as e:
            sys.exit(f"error: {e}")
        return [dict(r, split=None) for r in rows]
    return None


def interleave(tasks):
    """Measuring order: level by level in turn (L1 #1, L2 #1, L3 #1, L1 #2, ...), so a run stopped early covers
    every level."""
    by_level = [[t for t in tasks if t["level"] == L] for L in sorted({t["level"] for t in tasks})]
    return [t for group in itertools.zip_longest(*by_level) for t in group if t]


def degenerate_of(task, own_ref, screened):
    """(True | False | None, source) for one task row; see the module docstring for the order of the sources."""
    if task.get("degenerate") is not None:
        d = task["degenerate"]
        return (any(d.values()) if isinstance(d, dict) else bool(d)), "tasks_file"
    if task["name"] in screened:
        return screened[task["name"]], "bench.degenerate_screen"
    m = re.match(r"level([123])/(\d+)_", task["name"])
    if m and not own_ref:
        return int(m.group(2)) in DEGENERATE_H200[int(m.group(1))], "REFERENCE.md §3 (H200 scan)"
    return None, "unknown"


def kernel_mix(rows):
    """Of the correct kernels in rows: how many called a custom kernel in bench's first correctness trial
    (custom_kernel_calls > 0), how many are PyTorch-only (== 0), unknown (None: not counted by bench), and how many
    carry CUDA source at all (__global__ or load_inline in the code; a static hint, not proof that it ran)."""
    ok = [r for r in rows if r.get("success")]
    calls = [r.get("custom_kernel_calls") for r in ok]
    return dict(correct=len(ok), custom_ran=sum(c is not None and c > 0 for c in calls),
                pytorch_only=sum(c == 0 for c in calls), unknown=sum(c is None for c in calls),
                cuda_source=sum(bool(r.get("cuda_source")) for r in ok))


def hack_counts(rows):
    """{kind: count} of bench's named hacks over every sample of rows (sample_hacks, else the row's own hack)."""
    kinds = [h for r in rows for h in (r.get("sample_hacks") or [r.get("hack")]) if h]
    return dict(sorted(collections.Counter(kinds).items()))


# Baselines: the reference module plus a ModelNew that subclasses its Model, so that both build the same weights from
# the same seed (REFERENCE.md §2) and the module stands alone, as bench expects of a candidate.
# A CUDA graph's output lives in its static memory and the next replay overwrites it, so the graph baselines
# (cuda_graph, reduce-overhead) return a copy: one device copy per call, which a checker that keeps outputs needs.
_CLONE = '''
def _clone_out(x):
    if isinstance(x, torch.Tensor):
        return x.clone()
    return type(x)(_clone_out(v) for v in x) if isinstance(x, (tuple, list)) else x
'''
_COMPILE = '''
class ModelNew(Model):
    """Baseline: the reference forward under torch.compile(mode={mode!r})."""
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._compiled_forward = torch.compile(super().forward, mode={mode!r})

    def forward(self, *args):
        return {ret}
'''
_CUDA_GRAPH = '''

class ModelNew(Model):
    """Baseline: the reference forward in a CUDA graph, captured on the first call (again if shapes or non-tensor
    arguments change); each call copies its inputs in, replays, and returns a clone of the static output."""
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._graph, self._key = None, None

    def forward(self, *args):
        key = tuple((tuple(a.shape), a.dtype, a.device) if isinstance(a, torch.Tensor) else ("const", repr(a)) for a in args)
        if key != self._key:
            self._static_in = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
            side = torch.cuda.Stream()  # warm-up on a side stream before capture, as the PyTorch docs show
            side.wait_stream(torch.cuda.current_stream())
            with torch.no_grad():
                with torch.cuda.stream(side):
                    for _ in range(3):
                        super().forward(*self._static_in)
                torch.cuda.current_stream().wait_stream(side)
                self._graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(self._graph):
                    self._static_out = super().forward(*self._static_in)
            self._key = key
        for buf, a in zip(self._static_in, args):
            if isinstance(a, torch.Tensor):
                buf.copy_(a)
        self._graph.replay()
        return _clone_out(self._static_out)
'''
_EAGER = '''
class ModelNew(Model):
    """The reference itself: to time it where no other run did, and (bench's flags_override) with cudnn.benchmark."""
'''


def baseline_source(ref_src, name):
    """A trusted candidate module for baseline `name`, built from the reference source. cudnn_benchmark is the
    reference itself: bench switches the flag on for the candidate side (flags_override)."""
    body = {"compile": _COMPILE.format(mode=None, ret="self._compiled_forward(*args)"),
            "compile_reduce_overhead": _CLONE + _COMPILE.format(mode="reduce-overhead",
                                                                ret="_clone_out(self._compiled_forward(*args))"),
            "cuda_graph": _CLONE + _CUDA_GRAPH, "cudnn_benchmark": _EAGER, "eager": _EAGER}[name]
    return ref_src.rstrip() + "\n\n\n# --- baseline written by evaluate.py ---\nimport torch\n" + body


def cache_env():
    """Environment that points torch.compile at the shared cache, for the warm-up workers and bench's timed child
    alike (inductor's parallel compile threads: $TORCHINDUCTOR_COMPILE_THREADS, else the CPUs shared by the workers;
    they are not part of inductor's cache key)."""
    d = os.path.abspath(os.path.expanduser(inductor_cache or "~/.cache/cudal1/inductor"))
    threads = os.environ.get("TORCHINDUCTOR_COMPILE_THREADS") or str(max(1, len(os.sched_getaffinity(0)) // max(1, compile_workers)))
    return dict(TORCHINDUCTOR_CACHE_DIR=d, TRITON_CACHE_DIR=os.path.join(d, "triton"), TORCHINDUCTOR_COMPILE_THREADS=threads)


def warm_child(folder):
    """`python evaluate.py --_warm FOLDER` (task.py, candidate.py, spec.json in FOLDER): builds and calls the
    baseline the way bench's child does (backend flags, seed 42, construction under torch.device, calls under
    no_grad outside it), so that inductor's cache key (graph, input metadata, flags) is the one bench will look up.
    Prints one "warm: ..." line; on an error the traceback and, last, "warm-up error: Type: message" (exit status 1)."""
    t0 = time.perf_counter()
    try:
        import importlib.util
        import torch
        spec = json.load(open(os.path.join(folder, "spec.json")))
        mods = {}
        for key in ("task", "candidate"):
            s = importlib.util.spec_from_file_location(f"warm_{key}", os.path.join(folder, key + ".py"))
            mods[key] = sys.modules[s.name] = importlib.util.module_from_spec(s)
            s.loader.exec_module(mods[key])
        import bench
        bench.set_flags(bench.FIXED_FLAGS)
        dev = torch.device(spec["device"])
        if dev.type == "cpu" and not os.environ.get("OMP_NUM_THREADS"):
            torch.set_num_threads(1)  # as bench's CPU child: inductor's C++ code may depend on the thread count
        t1 = time.perf_counter()
        with torch.no_grad():
            torch.manual_seed(42)
            with torch.device(dev):
                init = [x.to(dev) if isinstance(x, torch.Tensor) else x for x in mods["task"].get_init_inputs()]
                torch.manual_seed(42)
                m = mods["candidate"].ModelNew(*init)
                torch.manual_seed(43)
                x = [a.to(dev) if isinstance(a, torch.Tensor) else a for a in mods["task"].get_inputs()]
            m = m.to(dev) if isinstance(m, torch.nn.Module) else m
            for _ in range(2):
                m(*x)
            if dev.type == "cuda":
                torch.cuda.synchronize()
    except BaseException as e:  # the parent shows the last line: make it the cause, not a timing
        import traceback
        traceback.print_exc()
        print(f"warm-up error: {type(e).__name__}: {(str(e).strip().splitlines() or [''])[-1][:300]}", flush=True)
        return 1
    # flushed now: a pipe is block-buffered, and a worker killed later (a stopped run) would lose the line
    print(f"warm: imports {t1 - t0:.1f} s, build + 2 calls {time.perf_counter() - t1:.1f} s", flush=True)
    return 0


def warm_failure(returncode, out):
    """Why a warm-up worker failed, in one line: the signal that killed it, else its last error line (a line with
    "Error" or "Exception", as a traceback ends), else its last line."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"killed by {name}" + (f" after '{out.strip().splitlines()[-1][:120]}'" if out.strip() else "")
    lines = [s.strip() for s in out.strip().splitlines() if s.strip()]
    errs = [s for s in lines if re.search(r"(Error|Exception|error)\b", s)]
    return f"exit status {returncode}: " + ((errs or lines or ["no output"])[-1][:300])


_WARM_PROCS, _WARM_STOP = [], []  # the warm-up workers alive; set by stop_warm (Ctrl-C, SIGTERM)


def stop_warm():
    """Stops every warm-up worker (a warm() running on another thread returns "stopped" for the rest)."""
    _WARM_STOP.append(True)
    for p in list(_WARM_PROCS):
        if p.poll() is None:
            p.kill()


def warm(jobs):
    """Compile [(task_name, task_src, baseline_src)] into the shared cache, compile_workers processes at a time.
    Returns {status: count} (ok, failed, timeout, stopped); a failed warm-up only means bench compiles that baseline
    itself, and its cause (warm_failure) is printed. Safe to run on a thread while bench times other tasks."""
    procs, env, stopping, times = _WARM_PROCS, dict(os.environ, **cache_env()), _WARM_STOP, []

    def one(job):
        if stopping:
            return "stopped"
        d = tempfile.mkdtemp(prefix="cudal1_warm_")
        try:
            for key, text in (("task", job[1]), ("candidate", job[2])):
                with open(os.path.join(d, key + ".py"), "w") as f:
                    f.write(text)
            common.write_json_atomic(os.path.join(d, "spec.json"), dict(device=device))
            t0 = time.time()
            p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--_warm", d], cwd=d, env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True)
            procs.append(p)
            try:
                out = p.communicate(timeout=timeout_s)[0]
            except subprocess.TimeoutExpired:
                p.kill()
                p.communicate()
                tqdm.write(f"warm-up of {job[0]} timed out after {timeout_s:.0f} s (bench will compile it)")
                return "timeout"
            if p.returncode == 0:
                times.append((time.time() - t0, (out.strip().splitlines() or ["?"])[-1]))
                return "ok"
            if stopping:  # killed because this run is stopping: not a failure of the warm-up
                return "stopped"
            tqdm.write(f"warm-up of {job[0]} failed (bench will compile it): {warm_failure(p.returncode, out)}")
            return "failed"
        finally:
            shutil.rmtree(d, ignore_errors=True)
    pool = ThreadPoolExecutor(max(1, compile_workers))
    try:
        st = dict(collections.Counter(pool.map(one, jobs)))
        if times:  # where a worker's time goes (the rest of its wall time is interpreter start and exit)
            wall, last = max(times)
            tqdm.write(f"warm-up: slowest worker {wall:.0f} s wall ({last})")
        return st
    except BaseException:
        stop_warm()  # Ctrl-C / SIGTERM: stop the workers this process started
        raise
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        procs[:] = [p for p in procs if p.poll() is None]


def pick_best(results):
    """Best of N: the passing sample (status ok: a "hack" record may carry a speedup) with the highest speedup, else
    the first failure (None if no sample)."""
    ok = [r for r in results if r.get("correct") and good(r.get("speedup")) and r.get("status", "ok") == "ok"]
    return max(ok, key=lambda r: r["speedup"]) if ok else (results[0] if results else None)


def record(task, method, res, **extra):
    """One results.jsonl row from a bench result (or a stub for a missing / unparsable kernel)."""
    row = dict(task=task, level=level_of(task), method=method)
    row.update({k: v for k, v in res.items() if k != "error"})
    row["error"] = (res.get("error") or "")[:2000] or None
    row["success"] = bool(res.get("correct") and good(res.get("speedup")) and res.get("status", "ok") == "ok")
    row["speedup"] = res.get("speedup") if row["success"] else None
    row.update(extra)
    return row


def run_bench(jobs, on_result=None, **kw):
    """bench results for (task_name, task_src, candidate_src[, per-job bench keywords]) jobs: ONE evaluate_many call,
    so builds run in parallel and every GPU times; on_result(i, result) as each finishes. Should that call itself
    fail, the jobs run one by one, and a job that raises becomes a "crash" result."""
    if not jobs:
        return []
    import bench
    try:
        res = list(bench.evaluate_many(jobs, build_workers=build_workers or None, progress=True, on_result=on_result,
                                       **kw))
        if len(res) != len(jobs):
            raise RuntimeError(f"{len(res)} results for {len(jobs)} jobs")
        return res
    except Exception as e:
        print(f"bench.evaluate_many failed ({type(e).__name__}: {e}); evaluating one by one")
    out = []
    for i, (name, ref, cand, *o) in enumerate(tqdm(jobs, desc="bench")):
        out.append(bench_one(name, ref, cand, **dict(kw, **(o[0] if o else {}))))
        if on_result is not None:
            on_result(i, out[-1])
    return out


def is_oom(res):
    """Did this bench result fail on CUDA memory (an out-of-memory error in the child)?"""
    return "OutOfMemoryError" in str(res.get("error_type") or "") or "CUDA out of memory" in str(res.get("error") or "")


def retry_oom(jobs, results, on_result=None, **kw):
    """Runs again, one at a time and alone (bench.evaluate: no other child of this run on the GPU), every job whose
    result is a CUDA out-of-memory error: with several children per GPU and warm-up workers, a task with tens of GB
    of inputs can run out of memory only because others held some (seen on the H200: level1/4's 8 GiB matrix).
    Returns the results with those replaced; on_result(i, result) for each re-run."""
    results = list(results)
    for i, (job, res) in enumerate(zip(jobs, results)):
        if is_oom(res):
            name, ref_src, cand_src, *o = job
            results[i] = bench_one(name, ref_src, cand_src, **dict(kw, **(o[0] if o else {})))
            results[i]["retried_after_oom"] = True
            tqdm.write(f"{name}: out of GPU memory beside other processes; alone: {results[i].get('status')}")
            if on_result is not None:
                on_result(i, results[i])
    return results


def bench_one(name, ref_src, cand_src, **kw):
    """bench.evaluate of one job; an exception becomes a "crash" result, so one task never stops the run."""
    import bench
    try:
        return bench.evaluate(ref_src, cand_src, task_name=name, **kw)
    except Exception as e:
        return dict(status="crash", correct=False, speedup=None, error=f"{type(e).__name__}: {e}")


def read_results(path):
    """{(task, method): row} of results.jsonl, the last row of a pair winning. A line cut short by a kill is skipped
    (and the file is given its missing newline, so the next append starts a clean line)."""
    rows = {}
    if not os.path.exists(path):
        return rows
    with open(path, "rb+") as f:
        data = f.read()
        if data and not data.endswith(b"\n"):
            f.write(b"\n")
    for n, line in enumerate(data.decode(errors="replace").splitlines(), 1):
        try:
            r = json.loads(line)
            rows[(r["task"], r["method"])] = r
        except (json.JSONDecodeError, KeyError, TypeError):
            if line.strip():
                print(f"warning: {path}:{n}: unreadable line skipped (a run killed while writing it?)")
    return rows


def write_csv(path, tasks, deg, rows, methods, main_method, ratios):
    """per_task.csv: one line per selected task; per method its speedup (x, empty = failed or not measured), status
    and time (ms); for the kernels also the hack, custom_kernel_calls, cuda_source, CUDA-L1's published scores and
    the `ratios` columns ({"kernels vs compile": {task: x}, ...})."""
    names = [t["name"] for t in tasks]
    pub_keys = sorted({k for n in names for k in (rows.get((n, main_method), {}).get("published") or {})})
    head = ["task", "level", "degenerate", "eager_ms"] + [f"{m}_{c}" for m in methods for c in ("speedup", "status", "ms")]
    if main_method:
        head += ["hack", "custom_kernel_calls", "cuda_source", "num_samples", "num_correct"] + pub_keys + list(ratios)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(head)
        for t in tasks:
            n = t["name"]
            line = [n, t["level"], deg[n], (rows.get((n, "eager")) or {}).get("ref_ms")]
            for m in methods:
                r = rows.get((n, m)) or {}
                line += [r.get("speedup"), r.get("status"), r.get("ref_ms" if m == "eager" else "cand_ms")]
            if main_method:
                r = rows.get((n, main_method)) or {}
                line += [r.get(k) for k in ("hack", "custom_kernel_calls", "cuda_source", "num_samples", "num_correct")]
                line += [(r.get("published") or {}).get(k) for k in pub_keys] + [v.get(n) for v in ratios.values()]
            w.writerow(["" if v is None else v for v in line])


def plot(spd, methods, levels_, timed, rows, out_dir):
    """Sorted speedup curves per level (failures at 1.0x); the kernels' speedup against each baseline's, or, with
    no kernels, each baseline's speedup against the eager time of the task."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(levels_), figsize=(5 * len(levels_), 4), squeeze=False)
    for ax, (lvl, names) in zip(axes[0], levels_):
        for m in methods:
            ax.plot(sorted((spd[m][t] or 1.0 for t in names if t in spd[m]), reverse=True), label=m)
        ax.set(yscale="log", title=lvl, xlabel="task (sorted)", ylabel="speedup vs eager (x)")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "speedup_sorted.png"), dpi=120)
    fig, axes = plt.subplots(1, max(1, len(timed)), figsize=(4.5 * max(1, len(timed)), 4), squeeze=False)
    for ax, b in zip(axes[0], timed):  # one point per task where both succeeded; above the diagonal = kernel faster
        if methods[0] in BASELINES:
            pts = [((rows.get((t, "eager")) or {}).get("ref_ms"), s) for t, s in spd[b].items() if s]
            pts = [p for p in pts if p[0]]
            ax.axhline(1, color="gray", lw=0.5)
            ax.set(xlabel="eager time (ms)", ylabel=f"{b} speedup (x)")
        else:
            pts = [(spd[b][t], k) for t, k in spd[methods[0]].items() if k and spd[b].get(t)]
            ax.axline((1, 1), slope=1, color="gray", lw=0.5)
            ax.set(xlabel=f"{b} speedup (x)", ylabel=f"{methods[0]} speedup (x)")
        if pts:
            ax.scatter(*zip(*pts), s=10)
        ax.set(xscale="log", yscale="log")
    if timed:
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, "speedup_vs_baselines.png"), dpi=120)
    plt.close("all")


def this_run():
    """What this invocation is: command, date, commit, Triton version (torch, CUDA and the GPU come with bench's
    records). A measuring run appends it to runs.jsonl, so a table measured over several calls names them all."""
    run = dict(command="python evaluate.py " + " ".join(shlex.quote(a) for a in sys.argv[1:]),
               date_utc=time.strftime("%Y-%m-%d %H:%M", time.gmtime()), git_commit=None, triton_version=None)
    try:
        import triton
        run["triton_version"] = triton.__version__
    except Exception:
        pass
    try:
        git = lambda *a: subprocess.run(["git", *a], cwd=common.ROOT, capture_output=True, text=True, timeout=10).stdout
        run["git_commit"] = git("rev-parse", "--short", "HEAD").strip() + ("-dirty" if git("status", "--porcelain", "-uno").strip() else "")
    except Exception:
        pass
    return run


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--_warm":
        sys.exit(warm_child(sys.argv[2]))
    config = common.configure(globals())
    if not summarize_only:
        common.check_device(device)
    if kernels and not os.path.exists(kernels):
        sys.exit(f"error: kernels file {kernels!r} not found")
    t0 = time.time()
    if kernels and model:
        sys.exit("error: give at most one of --kernels=FILE and --model=NAME (neither: the baselines alone)")
    if prompt not in ("stage1", "contrastive"):
        sys.exit(f"error: --prompt must be stage1 or contrastive, not {prompt!r}")
    bl = [b.strip() for b in baselines.split(",") if b.strip()]
    if set(bl) - set(BASELINES):
        sys.exit(f"error: unknown baselines {sorted(set(bl) - set(BASELINES))} (known: {', '.join(BASELINES)})")
    main_method = "kernels" if kernels else "model" if model else None
    if not main_method and not bl:
        sys.exit("error: nothing to evaluate: no --kernels, no --model and no --baselines")
    source = kernels or model or "baselines only"
    tasks_file = tasks_file or os.path.join(out_dir, "tasks.jsonl")
    db_file = db_file or os.path.join(out_dir, "rl", "db.json")
    out_dir = eval_dir or os.path.join(out_dir, "eval")  # from here on out_dir is where this stage writes
    os.makedirs(out_dir, exist_ok=True)
    res_path = os.path.join(out_dir, "results.jsonl")
    rows = read_results(res_path)  # every (task, method) row already measured is kept and not measured again
    runs_path = os.path.join(out_dir, "runs.jsonl")
    if not summarize_only:
        common.append_jsonl(runs_path, this_run())

    # ---- the task set: prepare.py's file or KernelBench; without either, the references inside the kernels file
    if not kernels and not kernelbench_dir and not os.path.exists(tasks_file):  # baselines or a model: the default set
        kernelbench_dir = next((d for d in (os.environ.get("KERNELBENCH_DIR"),
                                            os.path.join(common.ROOT, "..", "shared", "kernelbench")) if d and os.path.isdir(d)), "")
    tasks = load_tasks(tasks_file, kernelbench_dir)
    task_source = tasks_file if os.path.exists(tasks_file) else kernelbench_dir or "the kernels file's ref_code"
    krows = read_kernels(kernels) if kernels else []
    if tasks is None and krows and all(k["ref_code"] for k in krows):
        tasks = list({k["task"]: dict(name=k["task"], level=k["level"], src=k["ref_code"], split=None) for k in krows}.values())
    if tasks is None and summarize_only:  # the report alone needs only the names
        tasks = [dict(name=n, level=level_of(n), src=None, split=None) for n in dict.fromkeys(t for t, _ in rows)]
    if tasks is None:
        sys.exit(f"error: no task set: {tasks_file} does not exist, no --kernelbench_dir, and no kernels file with ref_code")
    outside = {k["task"] for k in match_tasks(krows, tasks)} - {t["name"] for t in tasks}
    if outside:
        print(f"ignoring the kernels of {len(outside)} tasks not in the task set: {sorted(outside)[:5]}")
    if task_names:
        wanted = [s.strip() for s in task_names.split(",") if s.strip()]
        if set(wanted) - {t["name"] for t in tasks}:
            sys.exit(f"error: unknown task names {sorted(set(wanted) - {t['name'] for t in tasks})}")
        tasks = [t for t in tasks if t["name"] in wanted]
    else:
        lv = {int(x) for x in str(levels).split(",") if x.strip()}
        tasks = [t for t in tasks if t["level"] in lv]
        if split != "all":
            if any(t.get("split") is None for t in tasks):
                sys.exit("error: --split needs a tasks_file with a split field (prepare.py writes one)")
            tasks = [t for t in tasks if t["split"] == split]
    if not tasks:
        sys.exit(f"error: no tasks left after the selection (levels={levels!r}, split={split!r}, "
                 f"task_names={task_names!r})")
    tasks.sort(key=lambda t: (t["level"], task_id_of(t["name"]) or 0, t["name"]))
    names = [t["name"] for t in tasks]
    order = [t["name"] for t in interleave(tasks)]
    ref = {t["name"]: t["src"] for t in tasks}
    own_ref = set()
    for k in krows:  # a kernel that brings its own reference (CUDA-L1) is timed against it, and so are the baselines
        if k["task"] in ref and k["ref_code"]:
            ref[k["task"]] = k["ref_code"]
            own_ref.add(k["task"])
    import bench
    unavailable = {}
    if "cuda_graph" in bl and not device.startswith("cuda"):
        unavailable["cuda_graph"] = "needs a CUDA device"
    timed = [b for b in bl if b != "eager" and b not in unavailable]
    other = {r.get("source") for r in rows.values() if r["method"] == main_method} - {source}
    if main_method and other and summarize_only:  # nothing is measured: the rows are reported as they are
        print(f"warning: {res_path} holds results of {sorted(other)}, not of {source}; reporting them as they are")
    elif main_method and other:
        sys.exit(f"error: {res_path} holds results of {sorted(other)}; use another --eval_dir")
    print(f"{len(tasks)} tasks from {task_source}, {main_method or 'no kernels'} from {source}, baselines {bl}, device {device}, "
          f"protocol {protocol}; {len({t for t, _ in rows})} tasks have rows in {res_path}")
    bench_kw = dict(device=device, protocol=protocol, atol=atol, rtol=rtol, timeout_s=timeout_s,
                    num_correct_trials=num_correct_trials or None, time_budget_s=time_budget_s,
                    arch=(arch or None) if device.startswith("cuda") else None)
    signal.signal(signal.SIGTERM, _interrupt)  # `timeout` / kill: stop measuring, still write the report
    try:
        # ---- phase 1: the candidates (samples[task] = list of (code or None, why there is no code)), in chunks
        todo = [n for n in order if main_method and (n, main_method) not in rows and not summarize_only]
        samples = {n: [] for n in todo}
        published = {}
        for k in krows:
            if k["task"] in samples:
                samples[k["task"]].append((k["code"], "no kernel in the kernels file"))
                published[k["task"]] = k["published"] or published.get(k["task"])
        if model and todo:
            db = json.load(open(db_file)) if prompt == "contrastive" and db_file else {}
            top2 = {n: [(e["code"], e["speedup"]) for e in sorted(db.get(n, []), key=lambda e: -e["speedup"])[:2]] for n in todo}
            prompts = [common.stage1_prompt(ref[n], gpu_name) if prompt == "stage1"
                       else common.contrastive_prompt(ref[n], top2[n], gpu_name) for n in todo]
            try:
                lm, tok = common.load_model(model, device=device)
            except RuntimeError as e:
                sys.exit(f"error: {e}")
            gen = common.generate(lm, tok, prompts, num_samples, max_new_tokens, temperature)
            for i, g in enumerate(tqdm(gen, total=len(prompts) * num_samples, desc="generate")):
                code, err = common.extract_code(g["text"])
                err = err and ("format error: " + err + (" (truncated at max_new_tokens)" if g["truncated"] else ""))
                samples[todo[i // num_samples]].append((code, err))
                common.append_jsonl(os.path.join(out_dir, "samples.jsonl"),
                                    dict(task=todo[i // num_samples], text=g["text"], truncated=g["truncated"], error=err))
            del lm, gen
            if device.startswith("cuda"):
                import torch
                torch.cuda.empty_cache()
        if main_method and not summarize_only:
            print(f"phase 1: {sum(bool(c) for n in todo for c, _ in samples[n])} candidates of {len(todo)} tasks "
                  f"({len(names) - len(todo)} tasks already measured)")
        for i in range(0, len(todo), chunk_tasks or 16):
            part = todo[i:i + (chunk_tasks or 16)]
            jobs = [(n, ref[n], code) for n in part for code, _ in samples[n] if code]
            results = iter(retry_oom(jobs, run_bench(jobs, static_checks=True, **bench_kw), static_checks=True, **bench_kw))
            for n in part:
                per = [next(results) if code else dict(status="format" if model else "missing", correct=False,
                                                       speedup=None, error=why) for code, why in samples[n]]
                best = pick_best(per) or dict(status="missing", correct=False, speedup=None, error="no kernel for this task")
                code = next((samples[n][i][0] for i, r in enumerate(per) if r is best), None)
                extra = dict(source=source, num_samples=len(per), num_correct=sum(bool(r.get("correct")) for r in per),
                             sample_status=[r.get("status") for r in per], sample_hacks=[r.get("hack") for r in per],
                             cuda_source=bool(code and re.search(r"__global__|load_inline", code)))
                if published.get(n):
                    extra["published"] = published[n]
                if model and best.get("correct"):
                    extra["code"] = code
                rows[(n, main_method)] = record(n, main_method, best, **extra)
                common.append_jsonl(res_path, rows[(n, main_method)])

        # ---- degenerate status of tasks that carry their own reference (or lack the tasks_file field)
        unknown = [t for t in tasks if degenerate_of(t, t["name"] in own_ref, {})[0] is None
                   and (t["name"], "screen") not in rows]
        if unknown and str(screen_degenerate) in ("True", "auto" if device.startswith("cuda") else "True") \
                and not summarize_only:
            for t in tqdm(unknown, desc="degenerate screen"):
                try:
                    r = bench.degenerate_screen(ref[t["name"]], task_name=t["name"], device=device, atol=atol, rtol=rtol)
                except Exception as e:
                    r = dict(degenerate=None, status="crash", error=f"{type(e).__name__}: {e}")
                rows[(t["name"], "screen")] = dict(task=t["name"], level=t["level"], method="screen", **{
                    k: r.get(k) for k in ("degenerate", "passed", "status", "error")})
                common.append_jsonl(res_path, rows[(t["name"], "screen")])

        # ---- phase 2: the baselines, trusted modules (static checks off), a chunk of tasks at a time: first the
        # compile baselines of the chunk into the shared cache in parallel, then every baseline timed one by one.
        # eager is the reference itself (1.0x); its time is the median ref_ms of the task's runs, and a task that has
        # none (everything else failed before timing) gets a run of the reference against itself.
        def ref_ms(n):
            ms = [r["ref_ms"] for (t, m), r in rows.items() if t == n and m != "eager" and r.get("ref_ms")]
            return float(np.median(ms)) if ms else None
        btodo = [n for n in order if not summarize_only and
                 (any((n, b) not in rows for b in timed) or ("eager" in bl and (n, "eager") not in rows))]
        if not summarize_only:
            print(f"phase 2: baselines of {len(btodo)} tasks ({len(names) - len(btodo)} with every row); compile "
                  f"cache {cache_env()['TORCHINDUCTOR_CACHE_DIR']}" + "".join(f"; {b} unavailable: {why}"
                                                                              for b, why in unavailable.items()))
        bar = tqdm(total=len(btodo), desc="baselines")
        step = chunk_tasks or max(1, compile_workers // max(1, sum(b in COMPILED for b in timed)))  # one wave of warm-ups
        chunks = [btodo[i:i + step] for i in range(0, len(btodo), step)]

        def warm_chunk(part):
            jobs = [(n, b) for n in part for b in timed if b in COMPILED and (n, b) not in rows]
            if compile_workers > 0 and jobs:
                st = warm([(n, ref[n], baseline_source(ref[n], b)) for n, b in jobs])
                tqdm.write(f"warm-up of {len(jobs)} compile baselines: {st}")

        def job_kw(b):
            kw = dict(extra_env=cache_env()) if b in COMPILED else {}
            return dict(kw, flags_override={"cudnn_benchmark": True}) if b == "cudnn_benchmark" else kw

        def save(jobs):
            def on_result(i, res):
                n, b = jobs[i]
                with save_lock:
                    rows[(n, b)] = record(n, b, res)
                    common.append_jsonl(res_path, rows[(n, b)])
                tqdm.write(f"{n} {b}: {rows[(n, b)]['status']} {rows[(n, b)]['speedup'] or 0:.2f}x "
                           f"({res.get('eval_s') or 0:.0f} s)")
            return on_result
        save_lock = __import__("threading").Lock()
        warmer = ThreadPoolExecutor(1)  # the next chunk's compile warm-up runs while this chunk is timed
        warming = warmer.submit(warm_chunk, chunks[0]) if chunks else None
        try:
            for k, part in enumerate(chunks):
                warming.result()
                if overlap_warmup and k + 1 < len(chunks):
                    warming = warmer.submit(warm_chunk, chunks[k + 1])
                jobs = [(n, b) for n in part for b in timed if (n, b) not in rows]
                bjobs = [(n, ref[n], baseline_source(ref[n], b), job_kw(b)) for n, b in jobs]
                results = run_bench(bjobs, static_checks=False, on_result=save(jobs), **bench_kw)
                if any(is_oom(r) for r in results):  # again alone, once the overlapping warm-up is done
                    warming.result()
                    retry_oom(bjobs, results, on_result=save(jobs), static_checks=False, **bench_kw)
                for n in part:
                    if "eager" in bl and (n, "eager") not in rows:
                        ms = ref_ms(n)
                        res = dict(status="ok", correct=True, speedup=1.0, ref_ms=ms)
                        if ms is None:
                            res = bench_one(n, ref[n], baseline_source(ref[n], "eager"), static_checks=False, **bench_kw)
                            res = dict(res, speedup=1.0 if res.get("ref_ms") else None)
                        rows[(n, "eager")] = record(n, "eager", res)
                        common.append_jsonl(res_path, rows[(n, "eager")])
                    bar.update(1)
                if not overlap_warmup and k + 1 < len(chunks):
                    warming = warmer.submit(warm_chunk, chunks[k + 1])
        except BaseException:
            stop_warm()
            raise
        finally:
            warmer.shutdown(wait=False, cancel_futures=True)
        bar.close()
    except KeyboardInterrupt as e:
        print(f"\ninterrupted ({e or 'Ctrl-C'}): the report below covers what was measured; rerun the same command "
              "to continue")
    signal.signal(signal.SIGTERM, signal.SIG_DFL)

    # ---- report: per method, per level and over all tasks, with and without the degenerate tasks
    screened = {t: r.get("degenerate") for (t, m), r in rows.items() if m == "screen"}
    deg, deg_src = {}, collections.Counter()
    for t in tasks:
        deg[t["name"]], s = degenerate_of(t, t["name"] in own_ref, screened)
        deg_src[s] += 1
    methods = ([main_method] if main_method else []) + [b for b in bl if b not in unavailable]
    # a run stopped early (Ctrl-C, `timeout`) still reports every method over the tasks it has rows for; "measured"
    # are the tasks every method has a row for, and each method's table counts only its own tasks
    have = {m: [n for n in names if (n, m) in rows] for m in methods}
    measured = [n for n in names if all((n, m) in rows for m in methods)]
    missing = [n for n in names if n not in measured]
    reported = [n for n in names if any((n, m) in rows for m in methods)]
    spd = {m: {n: rows[(n, m)]["speedup"] for n in have[m]} for m in methods}
    table_methods = list(methods)
    if main_method:
        for b in timed:  # kernel over baseline, task by task, where both have a row; eager where the baseline failed
            spd[f"{main_method} vs {b}"] = {n: (k / spd[b][n] if spd[b][n] else k) if k else None
                                            for n, k in spd[main_method].items() if n in spd[b]}
            table_methods.append(f"{main_method} vs {b}")
        pub = {n: rows[(n, main_method)].get("published") or {} for n in have[main_method]}
        for b, key in PUBLISHED.items() if any(pub.values()) else ():  # CUDA-L1's own numbers, for comparison only
            if b == "eager" or b in bl:
                m = "published" + (f" vs {b}" if b != "eager" else "")
                spd[m] = {n: p[key] if good(p.get(key)) else None for n, p in pub.items()}
                table_methods.append(m)
    level_by_name = {t["name"]: t["level"] for t in tasks}
    by_level = [(f"level{L}", [n for n in reported if level_by_name[n] == L])
                for L in sorted({level_by_name[n] for n in reported}, key=str)]
    by_level.append(("all", reported))
    runs = common.read_jsonl(runs_path) if os.path.exists(runs_path) else []
    env = next(({k: r.get(k) for k in ("device_name", "torch_version", "cuda_version", "protocol")}
                for r in rows.values() if r.get("device_name")), {})
    runs = runs or [this_run()]  # a re-summary names only the runs that measured
    env.update({k: v for k, v in runs[-1].items() if k != "command"}, commands=[r["command"] for r in runs])
    tables = {}
    unknown_deg = [n for n in reported if deg[n] is None]
    variants = [("all tasks", lambda n: True)] + ([] if unknown_deg else [("without degenerate tasks", lambda n: not deg[n])])
    for title, keep in variants:
        tables[title] = [dict(method=m, level=lvl, **summarize([spd[m][n] for n in ns if keep(n) and n in spd[m]]))
                         for m in table_methods for lvl, ns in by_level]
    text = (f"speedup = t_eager / t_method (x); a failed task counts as 1.0x except in 'mean ok'; ok and >1.01x are "
            f"counts of tasks; fast_p = share of all tasks correct with speedup > p. Device {env.get('device_name') or device}, "
            f"torch {env.get('torch_version')}, CUDA {env.get('cuda_version')}, Triton {env.get('triton_version')}, "
            f"protocol {protocol}, atol {atol}, rtol {rtol}, commit {env.get('git_commit')}, {env['date_utc']} UTC.\n"
            + "".join(f"Command: `{c}`\n" for c in env["commands"]) + f"\nMeasured {len(measured)} of {len(names)} selected tasks"
            + (f"; missing ({len(missing)}): {', '.join(missing[:40])}{' ...' if len(missing) > 40 else ''}" if missing else "")
            + "".join(f"\n- {m}: {len(have[m])} of {len(names)} tasks" + (f", missing {len(names) - len(have[m])}" if
                      len(have[m]) < len(names) else "") for m in methods if missing)
            + (f"\nEach table row counts only the tasks its method has rows for ('K vs B': both); the run is partial"
               if missing else "")
            + f".\nDegenerate tasks (REFERENCE.md §3): {sum(bool(deg[n]) for n in reported)} of the "
            + ("reported" if missing else "measured") + "; sources: "
            + ", ".join(f"{s} {c}" for s, c in deg_src.items()) + ".\n")
    for title, entries in tables.items():
        text += f"\n### {title}\n\n" + markdown_table(entries)
    if unknown_deg:
        text += f"\n### without degenerate tasks\n\nunknown: {len(unknown_deg)} reported tasks have no degenerate " \
                f"status (no tasks_file field, no screen, not a KernelBench L1-L3 name): {', '.join(unknown_deg[:10])}\n"
    text += "".join(f"\n- {b}: unavailable ({why})" for b, why in unavailable.items())
    mix, hacks = {}, {m: hack_counts([rows[(n, m)] for n in have[m]]) for m in methods}
    if main_method:
        mix = {lvl: kernel_mix([rows[(n, main_method)] for n in ns if (n, main_method) in rows]) for lvl, ns in by_level}
        text += ("\n\n### what the correct kernels are (bench's custom_kernel_calls in the first correctness trial)\n\n"
                 "| level | correct | custom kernel ran | PyTorch only | unknown | CUDA in source | share custom |\n"
                 "|---|---:|---:|---:|---:|---:|---:|\n"
                 + "".join(f"| {lvl} | {x['correct']} | {x['custom_ran']} | {x['pytorch_only']} | {x['unknown']} | "
                           f"{x['cuda_source']} | {x['custom_ran'] / x['correct'] if x['correct'] else 0:.0%} |\n"
                           for lvl, x in mix.items()))
    text += "\n\nhacks named by bench, by kind: " + ("; ".join(f"{m}: " + ", ".join(f"{k} {v}" for k, v in h.items())
                                                             for m, h in hacks.items() if h) or "none") + "\n"
    print("\n" + text)
    with open(os.path.join(out_dir, "summary.md"), "w") as f:
        f.write(f"# Evaluation: {main_method or 'baselines'} = {source}\n\n{text}")
    common.write_json_atomic(os.path.join(out_dir, "summary.json"), dict(
        config=config, env=env, unavailable=unavailable, measured=len(measured), missing=missing,
        measured_by_method={m: len(have[m]) for m in methods},
        degenerate={n: deg[n] for n in names}, tables=tables, kernel_mix=mix, hacks=hacks,
        elapsed_s=round(time.time() - t0, 1)))
    write_csv(os.path.join(out_dir, "per_task.csv"), tasks, deg, rows, methods, main_method,
              {m: spd[m] for m in table_methods if " vs " in m})
    try:
        plot(spd, methods, by_level, timed, rows, out_dir)
    except Exception as e:  # a plot is never worth losing the run
        print(f"plotting failed: {type(e).__name__}: {e}")
    print(f"wrote {out_dir}/results.jsonl, summary.md, summary.json, per_task.csv and plots in {time.time() - t0:.0f}s")
