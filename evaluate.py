"""
Evaluate kernels (or only the baselines) on KernelBench tasks and report them the way CUDA-L1 does (arXiv 2507.14111;
REFERENCE.md §1.5, §2; issue 5).

    python evaluate.py --kernelbench_dir=$KERNELBENCH_DIR --baselines=eager,compile,compile_reduce_overhead,cuda_graph
    python evaluate.py --kernels=a100.jsonl --baselines=eager,compile,compile_reduce_overhead,cuda_graph,cudnn_benchmark
    python evaluate.py --model=out/rl/ckpt --split=eval --num_samples=4
    python evaluate.py --model=before_rl=out/sft,after_rl=out/rl/ckpt --num_samples=16   # two models side by side

Per task, speedup = t_ref / t_method: the median time of the eager reference `Model` over that of the candidate
`ModelNew`, both timed by bench.evaluate on one device under one protocol, after bench has checked the outputs
(atol = rtol = 1e-2, the tolerance of all published KernelBench and CUDA-L1 numbers) and screened the candidate for the
reward hacks of REFERENCE.md §4. A kernel that breaks the answer format, fails to build, crashes, times out, is wrong
or is flagged as a hack is a failure, and so is a task with no kernel at all. The kernels come from either
  --kernels=FILE  JSON lines, each this project's {"task", "code"[, "ref_code"]} or a line of the CUDA-L1 release
                  (taskset.read_kernels). A line with its own ref_code is timed against it (CUDA-L1 used the 2025
                  "v0" task sizes); its published score_* go into the per-task record next to our measurement.
                  Several lines for one task are samples (best of N), or
  --model=NAME    num_samples answers per task to common.py's stage-1 or contrastive prompt; best of N by speedup.
                  A comma list label=NAME,... evaluates several models on the same prompts (e.g. before and after
                  RL), each distinct kernel timed once for all of them, and reports them side by side, or
  neither         baselines only: the table of the baselines themselves on this GPU (issue 5 item 5).

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
its child mostly loads compiled code. The candidates are measured in one batch (builds in parallel, each evaluated as
its build ends), the baselines in chunks; tasks go in with levels interleaved, so that a run stopped early (Ctrl-C,
SIGTERM from `timeout`) covers every level. Nothing measured is lost: every answer is appended to
samples.jsonl as it is generated, every kernel's result to kernels.jsonl and every row to results.jsonl as soon as
it is measured; a rerun of the same command continues from them, and --summarize_only=True only rebuilds the report.
The statistics and the report: report.py.

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

Outputs in eval_dir (default out_dir/eval; with --kernels=F out_dir/eval_<F's name>, so that checking a kernels file
never rewrites the report of a model's evaluation in the same run folder, e.g. the demo's): results.jsonl (a row per
(task, method)), kernels.jsonl (every distinct kernel's bench result), runs.jsonl (command, date, commit, versions of
every measuring run), summary.json, summary.md (the tables, also printed, with the commands and versions),
per_task.csv (every per-task number), speedup_sorted.png, speedup_vs_baselines.png, and with --model samples.jsonl
(every answer).
"""
import collections
import hashlib
import itertools
import os
import re
import shlex
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from tqdm import tqdm

from evaluation import baseline
import common
import prompting
from evaluation import report
from evaluation import taskset
from training import generation, models

# -----------------------------------------------------------------------------
# config: --key=value overrides any of these (common.configure)
kernels = ""                    # kernels file (this project's rows or the CUDA-L1 release format)
model = ""                      # HF name or folder whose answers are evaluated, or label=NAME,... for several models
tasks_file = ""                 # prepare.py's task set (name, level, src, split); "" = out_dir/tasks.jsonl
kernelbench_dir = ""            # KernelBench folder when no tasks_file; "" = $KERNELBENCH_DIR or ../shared/kernelbench
levels = "1,2,3"                # KernelBench levels to evaluate
split = "all"                   # which tasks of tasks_file: train | eval | all
task_names = ""                 # comma list of task names; overrides levels and split
prompt = "stage1"               # stage1 | contrastive (exemplars: the top-2 kernels by speedup in db_file)
db_file = ""                    # {task_name: [{"code", "speedup", "step"}, ...]}; "" = out_dir/rl/db.json (rl.py's)
num_samples = 1                 # answers per task and model; the tables take the best of N by measured speedup
max_new_tokens = 2048           # longest answer, in tokens
temperature = 0.7               # sampling temperature of the models
seed = 1337                     # torch seed before each model's sampling (the same prompts and stream for each)
baselines = "eager,compile"     # from: eager, compile, compile_reduce_overhead, cuda_graph, cudnn_benchmark
device = "cuda"                 # where candidates run: cuda | cpu
gpu = "h200"                    # --gpu=NAME applies common.GPU_PRESETS[NAME] (device, arch, gpu_name)
arch = "9.0"                    # nvcc arch for bench's builds
gpu_name = "NVIDIA H200"        # the GPU named in the prompt
protocol = "strict"             # bench's timing protocol: strict | kernelbench | cudal1
out_dir = "out"                 # the run folder of the other stages
eval_dir = ""                   # where results go; "" = out_dir/eval (with --kernels=F: out_dir/eval_<F's name>)
atol = 1e-2                     # absolute tolerance of the output check
rtol = 1e-2                     # relative tolerance of the output check
timeout_s = 300.0               # per candidate, in bench (build, checks and timing), s
num_correct_trials = 0          # bench's correctness trials; 0 = the protocol's
time_budget_s = 2.0             # bench: seconds the timed calls of one model should take
build_workers = 0               # parallel builds in bench.evaluate_many; 0 = its default (CPUs less 2 per GPU)
compile_workers = 8             # parallel processes that warm the inductor cache for the compile baselines; 0 = off
inductor_cache = ""             # shared TORCHINDUCTOR_CACHE_DIR; "" = ~/.cache/cudal1/inductor
chunk_tasks = 0                 # tasks per chunk; 0 = all (kernels), one wave of warm-ups (baselines)
overlap_warmup = True           # warm the next chunk's compile baselines while this chunk is timed (see Departures)
screen_degenerate = "auto"      # auto (on for CUDA) | True | False: screen tasks of unknown status
summarize_only = False          # only rebuild the report from results.jsonl; measures nothing
# -----------------------------------------------------------------------------

BASELINES = ("eager", "compile", "compile_reduce_overhead", "cuda_graph", "cudnn_benchmark")
COMPILED = ("compile", "compile_reduce_overhead")


def interleave(tasks):
    """Measuring order: level by level in turn (L1 #1, L2 #1, L3 #1, L1 #2, ...), so a run stopped early covers
    every level."""
    by_level = [[t for t in tasks if t["level"] == L] for L in sorted({t["level"] for t in tasks})]
    return [t for group in itertools.zip_longest(*by_level) for t in group if t]


def parse_models(spec):
    """[(method, name)] of --model: "NAME" -> [("model", NAME)]; "a=X,b=Y" -> [("a", X), ("b", Y)]; an unlabelled
    entry of a list is "model<i>". Raises ValueError for a label used twice or one that names a baseline."""
    items = [s.strip() for s in spec.split(",") if s.strip()]
    out = []
    for i, s in enumerate(items, 1):
        label, sep, name = s.partition("=")
        out.append((label.strip(), name.strip()) if sep else ("model" if len(items) == 1 else f"model{i}", s))
    labels = [m for m, _ in out]
    if len(set(labels)) < len(labels) or set(labels) & set(BASELINES + ("kernels", "screen")):
        raise ValueError(f"--model labels must be distinct and not a baseline's name: {labels}")
    return out


def pick_best(results):
    """Best of N: the passing sample (status ok: a "hack" record may carry a speedup) with the highest speedup, else
    the first failure (None if no sample)."""
    ok = [r for r in results if r.get("correct") and report.good(r.get("speedup")) and r.get("status", "ok") == "ok"]
    return max(ok, key=lambda r: r["speedup"]) if ok else (results[0] if results else None)


def record(task, method, res, **extra):
    """One results.jsonl row from a bench result (or a stub for a missing / unparsable kernel)."""
    row = dict(task=task, level=taskset.level_of(task), method=method)
    row.update({k: v for k, v in res.items() if k != "error"})
    row["error"] = (res.get("error") or "")[:2000] or None
    row["success"] = bool(res.get("correct") and report.good(res.get("speedup")) and res.get("status", "ok") == "ok")
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
    """{(task, method): row} of results.jsonl, the last row of a pair winning (common.read_appended: a line cut short
    by a kill is skipped)."""
    return {(r["task"], r["method"]): r for r in common.read_appended(path)
            if isinstance(r, dict) and {"task", "method"} <= set(r)}


def sample_answers(todo, samples, mains, ref, path):
    """Fill samples[(task, method)] with num_samples (code or None, why there is none) answers of each model: those
    already in samples.jsonl (`path`; a rerun continues), then new ones, sampled after torch.manual_seed(seed) with
    the same prompts for every model (stage-1, or contrastive with the top-2 kernels of db_file) and appended to
    samples.jsonl one by one as they are generated."""
    import torch
    old = collections.defaultdict(list)  # (task, method, model) -> answers of an earlier run of this command
    for r in common.read_appended(path):
        if r.get("method"):
            old[(r["task"], r["method"], r.get("model"))].append((r.get("code"), r.get("error")))
    try:
        db = common.read_json(db_file) if prompt == "contrastive" and db_file and os.path.exists(db_file) else {}
    except ValueError as e:
        sys.exit(f"error: {e}")
    top2 = lambda n: [(e["code"], e["speedup"]) for e in sorted(db.get(n, []), key=lambda e: -e["speedup"])[:2]]
    text = lambda n: (prompting.stage1_prompt(ref[n], gpu_name) if prompt == "stage1"
                      else prompting.contrastive_prompt(ref[n], top2(n), gpu_name))
    for m, name in mains:
        need = {}
        for n in [n for n, mm in todo if mm == m]:
            samples[(n, m)] = old[(n, m, name)][:num_samples]
            if len(samples[(n, m)]) < num_samples:
                need[n] = num_samples - len(samples[(n, m)])
        if not need:
            continue
        try:
            lm, tok = models.load_model(name, device=device)
        except RuntimeError as e:
            sys.exit(f"error: {e}")
        torch.manual_seed(seed)
        for k in sorted(set(need.values())):  # tasks that lack k answers (all of them, unless a run was stopped)
            group = [n for n in need if need[n] == k]
            gen = generation.generate(lm, tok, [text(n) for n in group], k, max_new_tokens, temperature)
            for i, g in enumerate(tqdm(gen, total=len(group) * k, desc=f"generate ({m})")):
                n = group[i // k]
                code, err = prompting.extract_code(g["text"])
                err = err and ("format error: " + err + (" (truncated at max_new_tokens)" if g["truncated"] else ""))
                samples[(n, m)].append((code, err))
                common.append_jsonl(path, dict(task=n, method=m, model=name, text=g["text"], truncated=g["truncated"],
                                               code=code, error=err))
        del lm
        if device.startswith("cuda"):
            torch.cuda.empty_cache()


def this_run():
    """What this invocation is: command, date, commit, torch / CUDA / Triton versions (bench's records add the GPU). A
    measuring run appends it to runs.jsonl, so a table measured over several calls names them all."""
    import torch
    run = dict(command="python evaluate.py " + " ".join(shlex.quote(a) for a in sys.argv[1:]),
               date_utc=time.strftime("%Y-%m-%d %H:%M", time.gmtime()), git_commit=None,
               torch_version=torch.__version__, cuda_version=torch.version.cuda, triton_version=None)
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


if __name__ == "__main__":
    common.exit_on_interrupt()  # SIGTERM (`timeout`, kill) raises KeyboardInterrupt, as Ctrl-C: the report is written
    config = common.configure(globals())
    if kernels and not os.path.exists(kernels):  # the user's file first: a clear error before any about the device
        sys.exit(f"error: kernels file {kernels!r} not found")
    try:                                        # ... and its malformed lines (a newcomer's CPU machine and the default
        krows = taskset.read_kernels(kernels) if kernels else []   # --device=cuda: the device error came first)
    except ValueError as e:
        sys.exit(f"error: {e}")
    if not summarize_only:
        common.check_device(device)
    t0 = time.time()
    if kernels and model:
        sys.exit("error: give at most one of --kernels=FILE and --model=NAME (neither: the baselines alone)")
    if prompt not in ("stage1", "contrastive"):
        sys.exit(f"error: --prompt must be stage1 or contrastive, not {prompt!r}")
    bl = [b.strip() for b in baselines.split(",") if b.strip()]
    if set(bl) - set(BASELINES):
        sys.exit(f"error: unknown baselines {sorted(set(bl) - set(BASELINES))} (known: {', '.join(BASELINES)})")
    try:
        mains = [("kernels", kernels)] if kernels else parse_models(model)  # the methods whose kernels we measure
    except ValueError as e:
        sys.exit(f"error: {e}")
    if not mains and not bl:
        sys.exit("error: nothing to evaluate: no --kernels, no --model and no --baselines")
    for _, name in (mains if model else []):  # a mistyped model folder: its one-line error before anything is written
        try:
            models.resolve_model(name, paths_only=True)
        except RuntimeError as e:
            sys.exit(f"error: {e}")
    tasks_file = tasks_file or os.path.join(out_dir, "tasks.jsonl")
    db_file = db_file or os.path.join(out_dir, "rl", "db.json")
    stem = re.sub(r"\W+", "_", os.path.splitext(os.path.basename(kernels))[0]) if kernels else ""
    out_dir = eval_dir or os.path.join(out_dir, f"eval_{stem}" if kernels else "eval")  # where this stage writes
    os.makedirs(out_dir, exist_ok=True)
    res_path = os.path.join(out_dir, "results.jsonl")
    rows = read_results(res_path)  # every (task, method) row already measured is kept and not measured again
    measured_before = {k for k, r in rows.items() if k[1] not in ("screen", "eager")}
    runs_path = os.path.join(out_dir, "runs.jsonl")

    # ---- the task set: prepare.py's file or KernelBench; without either, the references inside the kernels file
    if not kernels and not kernelbench_dir and not os.path.exists(tasks_file):  # baselines or a model: the default set
        kernelbench_dir = taskset.find_kernelbench()
    try:
        tasks = taskset.read_task_set(tasks_file, kernelbench_dir, [int(x) for x in str(levels).split(",") if x])
    except ValueError as e:
        sys.exit(f"error: {e}")
    task_source = tasks_file if os.path.exists(tasks_file) else kernelbench_dir or "the kernels file's ref_code"
    if tasks is None and krows and all(k["ref_code"] for k in krows):
        tasks = list({k["task"]: dict(name=k["task"], level=k["level"], src=k["ref_code"], split=None) for k in krows}.values())
    if tasks is None and summarize_only:  # the report alone needs only the names
        tasks = [dict(name=n, level=taskset.level_of(n), src=None, split=None) for n in dict.fromkeys(t for t, _ in rows)]
    if tasks is None:
        env = os.environ.get("KERNELBENCH_DIR")                     # set, but to a folder that is not there
        sys.exit(f"error: no task set: {tasks_file} does not exist, no --kernelbench_dir"
                 + (f", $KERNELBENCH_DIR={env} is not a folder" if env and not os.path.isdir(env) else "")
                 + ", and no kernels file with ref_code")
    outside = {k["task"] for k in taskset.match_tasks(krows, tasks)} - {t["name"] for t in tasks}
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
                why = "has no split field" if os.path.exists(tasks_file) else "does not exist"
                sys.exit(f"error: --split={split} needs the split that prepare.py writes into {tasks_file}, which "
                         f"{why}; give the --out_dir (or --preset) of a prepared run, or --split=all")
            tasks = [t for t in tasks if t["split"] == split]
    if not tasks:
        sys.exit(f"error: no tasks left after the selection (levels={levels!r}, split={split!r}, "
                 f"task_names={task_names!r})")
    tasks.sort(key=lambda t: (t["level"], taskset.task_id_of(t["name"]) or 0, t["name"]))
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
    for m, src in mains:
        other = {r.get("source") for r in rows.values() if r["method"] == m} - {src}
        if other and summarize_only:  # nothing is measured: the rows are reported as they are
            print(f"warning: {res_path} holds {m} results of {sorted(other)}, not of {src}; reporting them as they are")
        elif other:
            sys.exit(f"error: {res_path} holds {m} results of {sorted(other)}, not of {src}; use another --eval_dir")
    if not summarize_only:       # only a run that measures is recorded (not one stopped by its own arguments)
        common.append_jsonl(runs_path, this_run())
    print(f"{len(tasks)} tasks from {task_source}, " + (", ".join(f"{m} from {s}" for m, s in mains) or "no kernels")
          + f", baselines {bl}, device {device}, protocol {protocol}; {len({t for t, _ in rows})} tasks have rows in "
          f"{res_path}")
    bench_kw = dict(device=device, protocol=protocol, atol=atol, rtol=rtol, timeout_s=timeout_s,
                    num_correct_trials=num_correct_trials or None, time_budget_s=time_budget_s,
                    arch=(arch or None) if device.startswith("cuda") else None)
    save_lock = __import__("threading").Lock()
    interrupted, timed_now = None, []  # timed_now: the distinct kernels this run measured
    try:
        # ---- phase 1: the candidates, samples[(task, method)] = [(code or None, why there is none)], then every
        # distinct (task, code) measured once for all methods; kernels.jsonl keeps each result
        todo = [(n, m) for n in order for m, _ in mains if (n, m) not in rows and not summarize_only]
        samples = {nm: [] for nm in todo}
        published = {}
        for k in krows:
            if (k["task"], "kernels") in samples:
                samples[(k["task"], "kernels")].append((k["code"], "no kernel in the kernels file"))
                published[k["task"]] = k["published"] or published.get(k["task"])
        if model and todo:
            sample_answers(todo, samples, mains, ref, os.path.join(out_dir, "samples.jsonl"))
        kpath = os.path.join(out_dir, "kernels.jsonl")
        key = lambda n, code: (n, hashlib.sha256(code.encode()).hexdigest()[:16])
        measured = {(r["task"], r["key"]): r["result"] for r in common.read_appended(kpath) if {"key", "result"} <= set(r)}
        ptasks = list(dict.fromkeys(n for n, _ in todo))
        if mains and not summarize_only:
            distinct = {key(n, c) for (n, _), s in samples.items() for c, _ in s if c}
            old = distinct & set(measured)
            nocode = sum(not c for s in samples.values() for c, _ in s)   # answers without a ModelNew block, no kernel
            print(f"phase 1: {sum(bool(c) for s in samples.values() for c, _ in s)} answers of {len(ptasks)} tasks"
                  + (f" ({nocode} more without code)" if nocode else "") + ", "
                  f"{len(distinct)} distinct kernels, each timed once ({len(names) - len(ptasks)} tasks already measured"
                  + (f"; {len(old)} kernels measured by an earlier run are reused" if old else "") + ")")
        def finish(n):  # the task's rows, once every one of its kernels is measured (called under save_lock)
            for m, src in mains:
                if (n, m) not in samples or (n, m) in rows or any(c and key(n, c) not in measured
                                                                  for c, _ in samples[(n, m)]):
                    continue
                per = [measured[key(n, code)] if code else dict(status="format" if model else "missing",
                                                                correct=False, speedup=None, error=why)
                       for code, why in samples[(n, m)]]
                best = pick_best(per) or dict(status="missing", correct=False, speedup=None,
                                              error="no kernel for this task")
                code = next((samples[(n, m)][i][0] for i, r in enumerate(per) if r is best), None)
                extra = dict(source=src, num_samples=len(per), num_correct=sum(bool(r.get("correct")) for r in per),
                             sample_status=[r.get("status") for r in per], sample_hacks=[r.get("hack") for r in per],
                             sample_speedups=[record(n, m, r)["speedup"] for r in per],
                             cuda_source=bool(code and re.search(r"__global__|load_inline", code)))
                if published.get(n):
                    extra["published"] = published[n]
                if model and best.get("correct"):
                    extra["code"] = code
                rows[(n, m)] = record(n, m, best, **extra)
                common.append_jsonl(res_path, rows[(n, m)])
                r = rows[(n, m)]
                tqdm.write(f"{n} {m}: " + (f"best of {len(per)}: " if len(per) > 1 else "") + f"{r['status']}"
                           + (f" {r['speedup']:.2f}x" if r["speedup"] else f" | {common.error_line(r)}")
                           + (f" ({r['num_correct']}/{len(per)} correct)" if len(per) > 1 else ""))

        # Every candidate in one evaluate_many (chunk_tasks=0): builds never wait for the slowest of a chunk (one
        # 135 s failing build held 15 others on the H200); a task's rows are written as its last kernel finishes.
        step = chunk_tasks or max(1, len(ptasks))
        for i in range(0, len(ptasks), step):
            part = ptasks[i:i + step]
            jobs = list({key(n, c): (n, ref[n], c) for n in part for m, _ in mains for c, _ in samples.get((n, m), [])
                         if c and key(n, c) not in measured}.values())

            def keep(j, res, jobs=jobs):  # as each job finishes (bench's worker thread), so Ctrl-C loses none
                if is_oom(res) and not res.get("retried_after_oom"):
                    return                # retry_oom runs it again alone, then calls keep with that result
                with save_lock:
                    timed_now.append(j)
                    measured[key(jobs[j][0], jobs[j][2])] = res
                    common.append_jsonl(kpath, dict(task=jobs[j][0], key=key(jobs[j][0], jobs[j][2])[1], result=res))
                    finish(jobs[j][0])
            with save_lock:
                for n in part:          # tasks with nothing left to measure (no kernel, or all measured before)
                    finish(n)
            retry_oom(jobs, run_bench(jobs, static_checks=True, on_result=keep, **bench_kw), on_result=keep,
                      static_checks=True, **bench_kw)

        # ---- degenerate status of tasks that carry their own reference (or lack the tasks_file field): the
        # judge screened every task a kernel of this run reached (bench's `degenerate`), the rest get a screen
        for t in tasks:
            scr = next((r["degenerate"] for (n, _), r in measured.items()
                        if n == t["name"] and isinstance(r.get("degenerate"), list)), None)
            if scr is not None and (t["name"], "screen") not in rows and not summarize_only:
                rows[(t["name"], "screen")] = dict(task=t["name"], level=t["level"], method="screen",
                                                   degenerate=bool(scr), passed=scr, status="ok", error="")
                common.append_jsonl(res_path, rows[(t["name"], "screen")])
        unknown = [t for t in tasks if report.degenerate_of(t, t["name"] in own_ref, {})[0] is None
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
        # none (everything else failed before timing) gets its reference timed alone (bench's reference_only).
        compile_env = baseline.cache_env(inductor_cache, compile_workers)  # the shared torch.compile cache

        def ref_ms(n):
            ms = [r["ref_ms"] for (t, m), r in rows.items() if t == n and m != "eager" and r.get("ref_ms")]
            return float(np.median(ms)) if ms else None
        btodo = [n for n in order if not summarize_only and
                 (any((n, b) not in rows for b in timed) or ("eager" in bl and (n, "eager") not in rows))]
        if not summarize_only:
            print(f"phase 2: baselines of {len(btodo)} tasks ({len(names) - len(btodo)} with every row); compile cache "
                  f"{compile_env['TORCHINDUCTOR_CACHE_DIR']}" + "".join(f"; {b} unavailable: {why}"
                                                                        for b, why in unavailable.items()))
        bar = tqdm(total=len(btodo), desc="baselines")
        ncomp = sum(b in COMPILED for b in timed)  # a chunk: one wave of compile warm-ups (none to warm: one chunk)
        step = chunk_tasks or (max(1, compile_workers // ncomp) if ncomp else max(1, len(btodo)))
        chunks = [btodo[i:i + step] for i in range(0, len(btodo), step)]

        def warm_chunk(part):
            jobs = [(n, b) for n in part for b in timed if b in COMPILED and (n, b) not in rows]
            if compile_workers > 0 and jobs:
                st = baseline.warm([(n, ref[n], baseline.baseline_source(ref[n], b)) for n, b in jobs], device,
                                   compile_workers, timeout_s, inductor_cache)
                tqdm.write(f"warm-up of {len(jobs)} compile baselines: {st}")

        def job_kw(b):
            kw = dict(extra_env=compile_env) if b in COMPILED else {}
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
        warmer = ThreadPoolExecutor(1)  # the next chunk's compile warm-up runs while this chunk is timed
        warming = warmer.submit(warm_chunk, chunks[0]) if chunks else None
        try:
            for k, part in enumerate(chunks):
                warming.result()
                if overlap_warmup and k + 1 < len(chunks):
                    warming = warmer.submit(warm_chunk, chunks[k + 1])
                jobs = [(n, b) for n in part for b in timed if (n, b) not in rows]
                bjobs = [(n, ref[n], baseline.baseline_source(ref[n], b), job_kw(b)) for n, b in jobs]
                results = run_bench(bjobs, static_checks=False, on_result=save(jobs), **bench_kw)
                if any(is_oom(r) for r in results):  # again alone, once the overlapping warm-up is done
                    warming.result()
                    retry_oom(bjobs, results, on_result=save(jobs), static_checks=False, **bench_kw)
                # eager: the median ref_ms of the task's rows; the tasks without one (no row reached its timing:
                # 125 of the CUDA-L1 A100 release's 250) get their reference timed alone (bench's reference_only: the
                # first half of an evaluation), all of the chunk in one evaluate_many (one by one, each timed twice
                # as reference and as candidate: 113 of 250 tasks took 157 s on the H200, 2026-12-02_s12)
                eager = [n for n in part if "eager" in bl and (n, "eager") not in rows]
                alone = [n for n in eager if ref_ms(n) is None]
                ejobs = [(n, ref[n], baseline.baseline_source(ref[n], "eager")) for n in alone]

                def save_eager(i, res):
                    n = alone[i]
                    with save_lock:
                        rows[(n, "eager")] = record(n, "eager", dict(res, speedup=1.0 if res.get("ref_ms") else None))
                        common.append_jsonl(res_path, rows[(n, "eager")])
                retry_oom(ejobs, run_bench(ejobs, static_checks=False, reference_only=True, on_result=save_eager,
                                           **bench_kw), on_result=save_eager, static_checks=False, reference_only=True,
                          **bench_kw)
                for n in eager:
                    if n not in alone:
                        rows[(n, "eager")] = record(n, "eager", dict(status="ok", correct=True, speedup=1.0,
                                                                     ref_ms=ref_ms(n)))
                        common.append_jsonl(res_path, rows[(n, "eager")])
                bar.update(len(part))
                if not overlap_warmup and k + 1 < len(chunks):
                    warming = warmer.submit(warm_chunk, chunks[k + 1])
        except BaseException:
            baseline.stop_warm()
            raise
        finally:
            warmer.shutdown(wait=False, cancel_futures=True)
        bar.close()
    except KeyboardInterrupt as e:
        interrupted = str(e) or "Ctrl-C"
        print(f"\nevaluate.py interrupted ({interrupted}): every row measured so far is kept in {out_dir}; the report "
              "below covers them" + ("" if os.environ.get("CUDAL1_CHAINED") else "; rerun the same command to continue"),
              flush=True)
    report.write_report(out_dir, rows, tasks, mains, bl, unavailable, own_ref, common.read_appended(runs_path) or [this_run()],
                        config, time.time() - t0)
    new = [k for k in rows if k[1] not in ("screen", "eager") and k not in measured_before]
    took = time.time() - t0
    print(f"wrote {out_dir}/results.jsonl, summary.md, summary.json, per_task.csv and plots in {took:.0f}s; "
          f"{len(timed_now)} distinct kernels measured by this run, {60 * len(timed_now) / max(took, 1e-9):.1f} per "
          f"minute (issue 12; baselines not counted), making {len(new)} (task, method) rows")
    if interrupted:
        sys.exit(130)
