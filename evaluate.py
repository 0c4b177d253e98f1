"""
Evaluate kernels on KernelBench tasks and report them the way CUDA-L1 does (arXiv 2507.14111; REFERENCE.md §1.5, §2).

Per task, speedup = t_ref / t_kernel: the median time of the eager reference `Model` over that of the candidate
`ModelNew`, both timed by bench.evaluate on one device under one protocol, after bench has checked the outputs
(atol = rtol = 1e-2, the tolerance of all published KernelBench and CUDA-L1 numbers) and screened the candidate for the
reward hacks of REFERENCE.md §4. A kernel that breaks the answer format, fails to build, crashes, times out, is wrong
or is flagged as a hack is a failure, and so is a task with no kernel at all. The kernels come from either
  --kernels=FILE  JSON lines, each this project's {"task", "code"[, "ref_code"]} or a line of the CUDA-L1 release
                  (level_id, task_id, ref_code, custom_code, score_*: §1.6). A line with its own ref_code is timed
                  against it (CUDA-L1 used the 2025 "v0" task sizes); its published score_* go into the per-task
                  record next to our measurement. Several lines for one task are samples (best of N), or
  --model=NAME    num_samples answers per task to common.py's stage-1 or contrastive prompt; best of N by speedup.

Baselines (the paper's comparison table) are TRUSTED modules generated from the reference source, timed by bench
against the same eager reference with static checks off: eager (the reference, 1.0x by definition), compile
(torch.compile), compile_reduce_overhead, cuda_graph (generic capture of the reference forward on static buffers),
cudnn_benchmark (torch.backends.cudnn.benchmark = True). Rows "K vs B" divide the kernel's speedup by B's, task by
task (= t_B / t_kernel, CUDA-L1's "speedup over torch.compile" etc.).

Statistics (summarize): the paper's headline mean counts a failed task as 1.0x (the reference is kept); also the mean
over successful tasks only, median / geometric mean / max / p25 / p50 / p75 with the same padding, the number of tasks
> 1.01x (the paper's second headline number) and KernelBench's fast_p = share of ALL tasks of a level that are correct
AND faster than p x, strictly (fast_0 = correctness rate).

Departures, so that nobody compares the wrong numbers:
  - CUDA-L1's released evaluator averages 7 rounds of paired trials (§1.7); bench reports medians under its own
    protocol. Published score_* are carried for comparison, never mixed into our statistics.
  - cuda_graph is one generic capture for every task, not CUDA-L1's per-task `cuda_graph_code` rewrite; it and
    compile_reduce_overhead return a copy of the graph's output (a replay overwrites it): one device copy per call.
  - "K vs B" is a ratio of two speedups from separate runs, each against its own timing of the reference. Where B
    failed on a task, the kernel is compared with eager there (what a user without B would run).
  - cudnn_benchmark flips a backend flag; if bench's runtime flag check still flags it (static checks off), that
    baseline is reported as unavailable (it needs bench support), never faked.
  - allow_degenerate is a placeholder: tasks whose tasks_file row has a true "degenerate" field (the §3 screen: 47
    tasks accept a trivial output; prepare.py does not write the field yet) are dropped unless it is True.

Outputs in eval_dir (default out_dir/eval): results.jsonl (a row per (task, method), appended as soon as measured; a rerun skips the rows it
holds), summary.json, summary.md (the table, also printed), speedup_sorted.png, speedup_vs_baselines.png, and with
--model samples.jsonl (every completion). E.g. python evaluate.py --kernels=a100.json --gpu=a100 --baselines=eager,
compile,compile_reduce_overhead,cuda_graph; python evaluate.py --model=out/rl/ckpt --split=eval --num_samples=4.
"""
import glob
import json
import math
import os
import re
import sys
import time

import numpy as np
from tqdm import tqdm

import common

# -----------------------------------------------------------------------------
# config: --key=value overrides any of these (common.configure)
kernels = ""                    # kernels file (this project's rows or the CUDA-L1 release format)
model = ""                      # HF name or local folder: generate the kernels instead
tasks_file = ""                 # prepare.py's task set ({"name", "level", "src", "split"} rows); "" = out_dir/tasks.jsonl
kernelbench_dir = ""            # or read KernelBench's level*/*.py directly (then there is no train/eval split)
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
build_workers = 0               # parallel builds in bench.evaluate_many; 0 = os.cpu_count()
allow_degenerate = False        # placeholder, see the docstring
# -----------------------------------------------------------------------------

BASELINES = ("eager", "compile", "compile_reduce_overhead", "cuda_graph", "cudnn_benchmark")
FAST_P = (0, 1, 1.5, 2)
PUBLISHED = {"eager": "score_default", "compile": "score_torch_compile_default", "cuda_graph": "score_cuda_graph",
             "compile_reduce_overhead": "score_torch_compile_reduce_overhead", "cudnn_benchmark": "score_cudnn"}


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


COLUMNS = [("tasks", "tasks"), ("ok", "successes"), ("mean", "mean"), ("mean ok", "mean_success"),
           ("median", "median"), ("geomean", "geomean"), ("max", "max"), ("p25", "p25"), ("p75", "p75"),
           (">1.01x", "count_gt_1_01")] + [(f"fast_{p}", f"fast_{p}") for p in FAST_P]


def markdown_table(entries):
    """The report: one row per (method, level) dict holding summarize()'s keys plus "method" and "level"."""
    def fmt(v):
        return "-" if v is None else str(v) if isinstance(v, int) else f"{v:.2f}"
    lines = ["| method | level | " + " | ".join(c for c, _ in COLUMNS) + " |", "|---|---|" + "---:|" * len(COLUMNS)]
    lines += [f"| {e['method']} | {e['level']} | " + " | ".join(fmt(e[k]) for _, k in COLUMNS) + " |" for e in entries]
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
    """The reference itself, to time it where no other run did."""
'''
_CUDNN = '''
class ModelNew(Model):
    """Baseline: the reference with cuDNN autotuning on (torch.backends.cudnn.benchmark = True)."""
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        torch.backends.cudnn.benchmark = True
'''


def baseline_source(ref_src, name):
    """A trusted candidate module for baseline `name`, built from the reference source."""
    body = {"compile": _COMPILE.format(mode=None, ret="self._compiled_forward(*args)"),
            "compile_reduce_overhead": _CLONE + _COMPILE.format(mode="reduce-overhead",
                                                                ret="_clone_out(self._compiled_forward(*args))"),
            "cuda_graph": _CLONE + _CUDA_GRAPH, "cudnn_benchmark": _CUDNN, "eager": _EAGER}[name]
    return ref_src.rstrip() + "\n\n\n# --- baseline written by evaluate.py ---\nimport torch\n" + body


def pick_best(results):
    """Best of N: the correct sample with the highest speedup, else the first failure (None if no sample)."""
    ok = [r for r in results if r.get("correct") and good(r.get("speedup"))]
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


def plot(spd, methods, levels_, timed, out_dir):
    """Sorted speedup curves per level (failures at 1.0x), and the kernels' speedup against each baseline's."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(levels_), figsize=(5 * len(levels_), 4), squeeze=False)
    for ax, (lvl, names) in zip(axes[0], levels_):
        for m in methods:
            ax.plot(sorted((spd[m].get(t) or 1.0 for t in names), reverse=True), label=m)
        ax.set(yscale="log", title=lvl, xlabel="task (sorted)", ylabel="speedup vs eager (x)")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "speedup_sorted.png"), dpi=120)
    fig, axes = plt.subplots(1, max(1, len(timed)), figsize=(4.5 * max(1, len(timed)), 4), squeeze=False)
    for ax, b in zip(axes[0], timed):  # one point per task where both succeeded; above the diagonal = kernel faster
        pts = [(spd[b][t], k) for t, k in spd[methods[0]].items() if k and spd[b].get(t)]
        if pts:
            ax.scatter(*zip(*pts), s=10)
        ax.axline((1, 1), slope=1, color="gray", lw=0.5)
        ax.set(xscale="log", yscale="log", xlabel=f"{b} speedup (x)", ylabel=f"{methods[0]} speedup (x)")
    if timed:
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, "speedup_vs_baselines.png"), dpi=120)
    plt.close("all")


def run_bench(jobs, **kw):
    """bench results for (task_name, task_src, candidate_src) jobs: ONE evaluate_many call, so builds run in parallel.
    Should that call itself fail, the jobs run one by one, and a job that raises becomes a "crash" result."""
    if not jobs:
        return []
    import bench
    try:
        res = list(bench.evaluate_many(jobs, build_workers=build_workers or os.cpu_count(), progress=True, **kw))
        if len(res) != len(jobs):
            raise RuntimeError(f"{len(res)} results for {len(jobs)} jobs")
        return res
    except Exception as e:
        print(f"bench.evaluate_many failed ({type(e).__name__}: {e}); evaluating one by one")
    out = []
    for name, ref, cand in tqdm(jobs, desc="bench"):
        try:
            out.append(bench.evaluate(ref, cand, task_name=name, **kw))
        except Exception as e:
            out.append(dict(status="crash", correct=False, speedup=None, error=f"{type(e).__name__}: {e}"))
    return out


if __name__ == "__main__":
    config = common.configure(globals())
    common.check_device(device)
    if kernels and not os.path.exists(kernels):
        sys.exit(f"error: kernels file {kernels!r} not found")
    t0 = time.time()
    if bool(kernels) == bool(model):
        sys.exit("error: give exactly one of --kernels=FILE and --model=NAME")
    if prompt not in ("stage1", "contrastive"):
        sys.exit(f"error: --prompt must be stage1 or contrastive, not {prompt!r}")
    bl = [b.strip() for b in baselines.split(",") if b.strip()]
    if set(bl) - set(BASELINES):
        sys.exit(f"error: unknown baselines {sorted(set(bl) - set(BASELINES))} (known: {', '.join(BASELINES)})")
    timed = [b for b in bl if b != "eager"]
    main_method = "kernels" if kernels else "model"
    source = kernels or model
    tasks_file = tasks_file or os.path.join(out_dir, "tasks.jsonl")
    db_file = db_file or os.path.join(out_dir, "rl", "db.json")
    out_dir = eval_dir or os.path.join(out_dir, "eval")  # from here on out_dir is where this stage writes
    os.makedirs(out_dir, exist_ok=True)

    # ---- the task set: prepare.py's file or KernelBench; without either, the references inside the kernels file
    tasks = load_tasks(tasks_file, kernelbench_dir)
    krows = read_kernels(kernels) if kernels else []
    if tasks is None:
        if not krows or any(k["ref_code"] is None for k in krows):
            sys.exit(f"error: no task set ({tasks_file} does not exist) and the kernels file does not carry ref_code")
        tasks = list({k["task"]: dict(name=k["task"], level=k["level"], src=k["ref_code"], split=None) for k in krows}.values())
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
    if not allow_degenerate and any(t.get("degenerate") for t in tasks):
        print(f"dropping {sum(bool(t.get('degenerate')) for t in tasks)} degenerate tasks (REFERENCE.md §3)")
        tasks = [t for t in tasks if not t.get("degenerate")]
    if not tasks:
        sys.exit(f"error: no tasks left after the selection (levels={levels!r}, split={split!r}, "
                 f"task_names={task_names!r})")
    tasks.sort(key=lambda t: (t["level"], task_id_of(t["name"]) or 0, t["name"]))
    names = [t["name"] for t in tasks]
    ref = {t["name"]: t["src"] for t in tasks}
    for k in krows:  # a kernel that brings its own reference (CUDA-L1) is timed against it, and so are the baselines
        if k["task"] in ref and k["ref_code"]:
            ref[k["task"]] = k["ref_code"]
    print(f"{len(tasks)} tasks, {main_method} from {source}, baselines {bl}, device {device}, protocol {protocol}")

    # ---- resume: every (task, method) row already in results.jsonl is kept and not measured again
    res_path = os.path.join(out_dir, "results.jsonl")
    old = common.read_jsonl(res_path) if os.path.exists(res_path) else []
    other = {r.get("source") for r in old if r["method"] == main_method} - {source}
    if other:
        sys.exit(f"error: {res_path} holds results of {sorted(other)}; use another --eval_dir")
    done = {(r["task"], r["method"]) for r in old}
    todo = [n for n in names if (n, main_method) not in done]
    print(f"resumed: {len(names) - len(todo)} tasks already measured, {len(todo)} to go")
    bench_kw = dict(device=device, protocol=protocol, atol=atol, rtol=rtol, timeout_s=timeout_s,
                    arch=(arch or None) if device.startswith("cuda") else None)

    # ---- phase 1: the candidates (samples[task] = list of (code or None, why there is no code))
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
    jobs = [(n, ref[n], code) for n in todo for code, _ in samples[n] if code]
    print(f"phase 1: {len(jobs)} candidates of {len(todo)} tasks")
    results = iter(run_bench(jobs, static_checks=True, **bench_kw))
    for n in todo:
        per = [next(results) if code else dict(status="format" if model else "missing", correct=False, speedup=None,
                                               error=why) for code, why in samples[n]]
        best = pick_best(per) or dict(status="missing", correct=False, speedup=None, error="no kernel for this task")
        extra = dict(source=source, num_samples=len(per), num_correct=sum(bool(r.get("correct")) for r in per),
                     sample_status=[r.get("status") for r in per])
        if published.get(n):
            extra["published"] = published[n]
        if model and best.get("correct"):
            extra["code"] = samples[n][next(i for i, r in enumerate(per) if r is best)][0]
        common.append_jsonl(res_path, record(n, main_method, best, **extra))

    # ---- phase 2: the baselines, trusted modules (static checks off) in one more evaluate_many call
    # eager is the reference itself (1.0x); its time is the median ref_ms of the runs of its task, and a task that has
    # none yet (its kernel failed before timing, no timed baseline) gets a run of the reference against itself
    rows = {(r["task"], r["method"]): r for r in common.read_jsonl(res_path)}  # the last row of a pair wins

    def ref_ms(n, extra=()):
        ms = [r["ref_ms"] for (t, _), r in rows.items() if t == n and r.get("ref_ms")] + [m for m in extra if m]
        return float(np.median(ms)) if ms else None
    bjobs = [(n, b) for n in names for b in timed if (n, b) not in rows]
    bjobs += [(n, "eager") for n in names if "eager" in bl and (n, "eager") not in rows and ref_ms(n) is None]
    print(f"phase 2: {len(bjobs)} baseline runs")
    eager_ms = {}
    for (n, b), res in zip(bjobs, run_bench([(n, ref[n], baseline_source(ref[n], b)) for n, b in bjobs],
                                            static_checks=False, **bench_kw)):
        if b == "eager":
            eager_ms[n] = res.get("ref_ms")
            continue
        if b == "cudnn_benchmark" and res.get("hack"):
            res = dict(res, status="unavailable", correct=False,
                       error=f"bench flags the cudnn.benchmark change at runtime ({res['hack']}); needs bench support")
        rows[(n, b)] = record(n, b, res)
        common.append_jsonl(res_path, rows[(n, b)])
    for n in names:
        if "eager" in bl and (n, "eager") not in rows:
            rows[(n, "eager")] = record(n, "eager", dict(status="ok", correct=True, speedup=1.0,
                                                         ref_ms=ref_ms(n, [eager_ms.get(n)])))
            common.append_jsonl(res_path, rows[(n, "eager")])

    # ---- report: per method, per level and over all tasks
    spd = {m: {n: rows[(n, m)]["speedup"] for n in names if (n, m) in rows} for m in [main_method] + bl}
    unavailable = [b for b in timed if any(rows.get((n, b), {}).get("status") == "unavailable" for n in names)]
    methods = [main_method] + [b for b in bl if b not in unavailable]
    for b in timed:
        if b not in unavailable:  # kernel over baseline, task by task; eager where the baseline failed
            spd[f"{main_method} vs {b}"] = {n: (k / spd[b][n] if spd[b].get(n) else k) if k else None
                                            for n, k in spd[main_method].items()}
            methods.append(f"{main_method} vs {b}")
    pub = {n: rows[(n, main_method)].get("published") or {} for n in names if (n, main_method) in rows}
    for b, key in PUBLISHED.items() if any(pub.values()) else ():  # CUDA-L1's own numbers, for comparison only
        if b == "eager" or b in bl:
            m = "published" + (f" vs {b}" if b != "eager" else "")
            spd[m] = {n: p[key] if good(p.get(key)) else None for n, p in pub.items()}
            methods.append(m)
    by_level = [(f"level{L}", [t["name"] for t in tasks if t["level"] == L]) for L in sorted({t["level"] for t in tasks})]
    by_level.append(("all", names))
    entries = [dict(method=m, level=lvl, **summarize([spd[m].get(n) for n in ns])) for m in methods for lvl, ns in by_level]
    env = next(({k: r.get(k) for k in ("device_name", "torch_version", "cuda_version", "protocol")}
                for r in rows.values() if r.get("device_name")), {})
    table = markdown_table(entries) + "".join(f"\n- {b}: unavailable (bench flags it at runtime; needs bench support)"
                                              for b in unavailable)
    print("\n" + table)
    with open(os.path.join(out_dir, "summary.md"), "w") as f:
        f.write(f"# Evaluation: {main_method} = {source}\n\nspeedup = t_eager / t_method (x); a failed task counts as "
                f"1.0x except in 'mean ok'; fast_p = share of all tasks correct with speedup > p. Device: "
                f"{env.get('device_name') or device}, protocol {protocol}, atol {atol}, rtol {rtol}.\n\n{table}\n")
    common.write_json_atomic(os.path.join(out_dir, "summary.json"),
                             dict(config=config, env=env, unavailable=unavailable, rows=entries,
                                  elapsed_s=round(time.time() - t0, 1)))
    try:
        plot(spd, [m for m in methods if " vs " not in m and not m.startswith("published")], by_level,
             [b for b in timed if b not in unavailable], out_dir)
    except Exception as e:  # a plot is never worth losing the run
        print(f"plotting failed: {type(e).__name__}: {e}")
    print(f"wrote {out_dir}/results.jsonl, summary.md, summary.json and plots in {time.time() - t0:.0f}s")
