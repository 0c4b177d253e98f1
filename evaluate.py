"""
Evaluate kernels (or the baselines alone) on KernelBench tasks; report them as CUDA-L1 does (REFERENCE.md §1.5, §2).

    python evaluate.py --kernelbench_dir=$KERNELBENCH_DIR --baselines=eager,compile,compile_reduce_overhead,cuda_graph
    python evaluate.py --kernels=a100.jsonl --baselines=eager,compile,compile_reduce_overhead,cuda_graph,cudnn_benchmark
    python evaluate.py --model=out/rl/ckpt --split=eval --num_samples=4
    python evaluate.py --model=before_rl=out/sft,after_rl=out/rl/ckpt --num_samples=16   # two models side by side

Steps: 1. the task set: prepare.py's tasks.jsonl, else a KernelBench folder, else the ref_code lines of a CUDA-L1
kernels file. 2. the kernels: a --kernels file (this project's {task, code} lines or the CUDA-L1 release; several
lines of a task are samples), or num_samples answers of each --model to the stage-1 or contrastive prompt
(evaluation/sampling.py). 3. every distinct kernel measured once by bench.py, all in one batch (evaluation/measure.py):
built, checked at atol = rtol = 1e-2, screened for the hacks of REFERENCE.md §4, timed against the eager reference;
speedup = t_eager / t_kernel, best of N per task. 4. the degenerate screen where no other source knows a task
(evaluation/screen.py). 5. the baselines (evaluation/baseline.py): trusted modules timed against the same reference,
the torch.compile ones first compiled in parallel into a shared cache. 6. the report (evaluation/report.py):
summary.md (printed), summary.json, per_task.csv and plots in eval_dir. Every answer, kernel result and row is
appended as it is measured (samples.jsonl, kernels.jsonl, results.jsonl): a rerun continues, Ctrl-C and SIGTERM
lose nothing, --summarize_only=True only rebuilds the report. A task without a passing kernel counts as 1.0x.
Baselines: eager (the reference, 1.0x), compile, compile_reduce_overhead, cuda_graph, cudnn_benchmark (the reference
with cudnn.benchmark on); a row "K vs B" is t_B / t_kernel per task (CUDA-L1's "speedup over torch.compile").

Departures from CUDA-L1's evaluator and KernelBench, so that nobody compares the wrong numbers:
  - times are bench's medians, not means of 7 rounds of paired trials (§1.7); published score_* are shown, not mixed.
  - cuda_graph is one generic capture of the reference, not CUDA-L1's per-task rewrite; graph baselines return a copy.
  - "K vs B" divides two speedups from separate runs; where B failed on a task, the kernel is compared with eager.
  - compile warm-ups share the GPU (Triton may autotune otherwise) and overlap the timing unless --overlap_warmup=False.
  - a stopped run reports each method over the tasks it has rows for, and says how many each one misses.
"""
import os
import re
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch
from tqdm import tqdm

import common
from evaluation import baseline
from evaluation import measure
from evaluation import report
from evaluation import sampling
from evaluation import screen
from evaluation import taskset
from harness import forkserver
from training import models

# -----------------------------------------------------------------------------
# config: --key=value overrides any of these (common.configure)
kernels = ""                    # kernels file (this project's rows or the CUDA-L1 release format)
model = ""                      # HF name or folder whose answers are evaluated, or label=NAME,... for several models
tasks_file = ""                 # prepare.py's task set (name, level, src, split); "" = out_dir/tasks.jsonl
kernelbench_dir = ""            # with no tasks_file; "" = $KERNELBENCH_DIR or shared/kernelbench beside the checkout
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
device = "cuda" if torch.cuda.is_available() else "cpu"  # where candidates run: cuda if torch sees a GPU, else cpu
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

if __name__ == "__main__":
    common.exit_on_interrupt()  # SIGTERM (`timeout`, kill) raises KeyboardInterrupt, as Ctrl-C: the report is written
    config = common.configure(globals())
    start_time = time.time()

    # ---- the arguments, each mistake with its own one-line error before anything is measured or written
    if kernels and not os.path.exists(kernels):
        sys.exit(f"error: kernels file {kernels!r} not found")
    try:
        kernel_rows = taskset.read_kernels(kernels) if kernels else []
    except ValueError as e:
        sys.exit(f"error: {e}")
    if kernels and model:
        sys.exit("error: give at most one of --kernels=FILE and --model=NAME (neither: the baselines alone)")
    if prompt not in ("stage1", "contrastive"):
        sys.exit(f"error: --prompt must be stage1 or contrastive, not {prompt!r}")
    baseline_names = [b.strip() for b in baselines.split(",") if b.strip()]
    if set(baseline_names) - set(baseline.BASELINES):
        sys.exit(f"error: unknown baselines {sorted(set(baseline_names) - set(baseline.BASELINES))} "
                 f"(known: {', '.join(baseline.BASELINES)})")
    try:
        mains = [("kernels", kernels)] if kernels else sampling.parse_models(model)  # [(method, source)] to measure
        for _, name in (mains if model else []):  # a mistyped model folder: its one-line error, no download tried
            models.resolve_model(name, paths_only=True)
    except (ValueError, RuntimeError) as e:
        sys.exit(f"error: {e}")
    if not mains and not baseline_names:
        sys.exit("error: nothing to evaluate: no --kernels, no --model and no --baselines")

    # ---- the task set: prepare.py's file or KernelBench; without either, the references inside the kernels file
    tasks_file = tasks_file or os.path.join(out_dir, "tasks.jsonl")
    db_file = db_file or os.path.join(out_dir, "rl", "db.json")
    if not kernels and not kernelbench_dir and not os.path.exists(tasks_file):  # baselines or a model: the default set
        kernelbench_dir = taskset.find_kernelbench()
    if kernelbench_dir and not os.path.isdir(kernelbench_dir) and not os.path.exists(tasks_file):
        sys.exit(f"error: KernelBench folder {kernelbench_dir!r} not found; pass --kernelbench_dir=PATH to its tasks "
                 "(prepare.py --download=True fetches them)")
    try:
        tasks = taskset.read_task_set(tasks_file, kernelbench_dir, [int(x) for x in str(levels).split(",") if x])
    except ValueError as e:
        sys.exit(f"error: {e}")
    task_source = tasks_file if os.path.exists(tasks_file) else kernelbench_dir or "the kernels file's ref_code"
    if tasks is None and kernel_rows and all(k["ref_code"] for k in kernel_rows):
        tasks = list({k["task"]: dict(name=k["task"], level=k["level"], src=k["ref_code"], split=None)
                      for k in kernel_rows}.values())
    if not eval_dir:  # a kernels file gets its own folder: checking one never overwrites a model's report
        stem = re.sub(r"\W+", "_", os.path.splitext(os.path.basename(kernels))[0])
        eval_dir = os.path.join(out_dir, f"eval_{stem}" if kernels else "eval")
    res_path, runs_path = os.path.join(eval_dir, "results.jsonl"), os.path.join(eval_dir, "runs.jsonl")
    rows = measure.read_results(res_path)  # every (task, method) row already measured is kept and not measured again
    measured_before = {k for k in rows if k[1] not in ("screen", "eager")}
    if tasks is None and summarize_only:  # the report alone needs only the names
        tasks = [dict(name=n, level=taskset.level_of(n), src=None, split=None)
                 for n in dict.fromkeys(t for t, _ in rows)]
    if tasks is None:
        env = os.environ.get("KERNELBENCH_DIR")                     # set, but to a folder that is not there
        sys.exit(f"error: no task set: {tasks_file} does not exist, no --kernelbench_dir"
                 + (f", $KERNELBENCH_DIR={env} is not a folder" if env and not os.path.isdir(env) else "")
                 + ", and no kernels file with ref_code; pass --kernelbench_dir=PATH (prepare.py --download=True "
                 "fetches KernelBench) or the --out_dir of a prepared run")
    outside = {k["task"] for k in taskset.match_tasks(kernel_rows, tasks)} - {t["name"] for t in tasks}
    if outside:
        print(f"ignoring the kernels of {len(outside)} tasks not in the task set: {sorted(outside)[:5]}")
    try:
        tasks = taskset.select_tasks(tasks, levels, split, task_names, tasks_file)
    except ValueError as e:
        sys.exit(f"error: {e}")
    names = [t["name"] for t in tasks]
    order = [t["name"] for t in taskset.interleave(tasks)]
    ref_src = {t["name"]: t["src"] for t in tasks}
    own_ref = set()
    for k in kernel_rows:  # a kernel that brings its own reference (CUDA-L1) is timed against it, and so are baselines
        if k["task"] in ref_src and k["ref_code"]:
            ref_src[k["task"]] = k["ref_code"]
            own_ref.add(k["task"])
    if not summarize_only:  # after the arguments and the task set: a CPU machine's first error names the real mistake
        common.check_device(device)
    unavailable = {}  # (the report of rows measured on a GPU, rebuilt elsewhere, keeps their cuda_graph rows)
    if "cuda_graph" in baseline_names and not device.startswith("cuda") and not (
            summarize_only and any(method == "cuda_graph" for _, method in rows)):
        unavailable["cuda_graph"] = "needs a CUDA device"
    timed = [b for b in baseline_names if b != "eager" and b not in unavailable]
    for method, source in mains:
        other = {r.get("source") for r in rows.values() if r["method"] == method} - {source}
        if other and summarize_only:  # nothing is measured: the rows are reported as they are
            print(f"warning: {res_path} holds {method} results of {sorted(other)}, not of {source}; reporting them "
                  "as they are")
        elif other:
            sys.exit(f"error: {res_path} holds {method} results of {sorted(other)}, not of {source}; use another "
                     "--eval_dir")
    os.makedirs(eval_dir, exist_ok=True)
    if not summarize_only:       # only a run that measures is recorded (not one stopped by its own arguments)
        common.append_jsonl(runs_path, report.this_run())
    print(f"{len(tasks)} tasks from {task_source}, " + (", ".join(f"{m} from {s}" for m, s in mains) or "no kernels")
          + f", baselines {baseline_names}, device {device}, protocol {protocol}; {len({t for t, _ in rows})} tasks "
          f"have rows in {res_path}")
    bench_kw = dict(device=device, protocol=protocol, atol=atol, rtol=rtol, timeout_s=timeout_s,
                    num_correct_trials=num_correct_trials or None, time_budget_s=time_budget_s,
                    arch=(arch or None) if device.startswith("cuda") else None)
    save_lock = threading.Lock()  # bench's worker threads write rows as results come
    interrupted, timed_now = None, []  # timed_now: the distinct kernels this run measured
    try:
        # ---- phase 1: the candidates. samples[(task, method)] = [(code or None, why there is none)]; every
        # distinct (task, code) is measured once for all methods, and kernels.jsonl keeps each result
        todo = [(n, m) for n in order for m, _ in mains if (n, m) not in rows and not summarize_only]
        samples = {pair: [] for pair in todo}
        published = {}
        for k in kernel_rows:
            if (k["task"], "kernels") in samples:
                samples[(k["task"], "kernels")].append((k["code"], "no kernel in the kernels file"))
                published[k["task"]] = k["published"] or published.get(k["task"])
        if model and todo:
            try:
                prompts = sampling.task_prompts(ref_src, dict.fromkeys(n for n, _ in todo), prompt, db_file, gpu_name)
            except ValueError as e:
                sys.exit(f"error: {e}")
            sampling.sample_answers(todo, samples, mains, prompts, os.path.join(eval_dir, "samples.jsonl"),
                                    num_samples, device, seed, max_new_tokens, temperature)
        kernels_path = os.path.join(eval_dir, "kernels.jsonl")
        measured = {(r["task"], r["key"]): r["result"] for r in common.read_appended(kernels_path)
                    if {"key", "result"} <= set(r)}   # {kernel_key: bench result}, this run's and earlier runs'
        todo_tasks = list(dict.fromkeys(n for n, _ in todo))
        if mains and not summarize_only:
            distinct = {measure.kernel_key(n, c) for (n, _), s in samples.items() for c, _ in s if c}
            reused = distinct & set(measured)
            no_code = sum(not c for s in samples.values() for c, _ in s)   # answers without a ModelNew block
            print(f"phase 1: {sum(bool(c) for s in samples.values() for c, _ in s)} answers of {len(todo_tasks)} "
                  "tasks" + (f" ({no_code} more without code)" if no_code else "") + f", {len(distinct)} distinct "
                  f"kernels, each timed once ({len(names) - len(todo_tasks)} tasks already measured"
                  + (f"; {len(reused)} kernels measured by an earlier run are reused" if reused else "") + ")")

        def finish_task(name):
            """The task's rows, once every one of its kernels is measured (called under save_lock)."""
            for method, source in mains:
                if (name, method) not in samples or (name, method) in rows or any(
                        code and measure.kernel_key(name, code) not in measured for code, _ in samples[(name, method)]):
                    continue
                per_sample = [measured[measure.kernel_key(name, code)] if code else dict(
                    status="format" if model else "missing", correct=False, speedup=None, error=why)
                    for code, why in samples[(name, method)]]
                best = measure.pick_best(per_sample) or dict(status="missing", correct=False, speedup=None,
                                                             error="no kernel for this task")
                code = next((samples[(name, method)][i][0] for i, r in enumerate(per_sample) if r is best), None)
                extra = dict(source=source, num_samples=len(per_sample),
                             num_correct=sum(bool(r.get("correct")) for r in per_sample),
                             sample_status=[r.get("status") for r in per_sample],
                             sample_hacks=[r.get("hack") for r in per_sample],
                             sample_speedups=[measure.record(name, method, r)["speedup"] for r in per_sample],
                             cuda_source=bool(code and re.search(r"__global__|load_inline", code)))
                if published.get(name):
                    extra["published"] = published[name]
                if model and best.get("correct"):
                    extra["code"] = code
                row = rows[(name, method)] = measure.record(name, method, best, **extra)
                common.append_jsonl(res_path, row)
                tqdm.write(f"{name} {method}: " + (f"best of {len(per_sample)}: " if len(per_sample) > 1 else "")
                           + f"{row['status']}" + (f" {row['speedup']:.2f}x" if row["speedup"]
                                                   else f" | {common.error_line(row)}")
                           + (f" ({row['num_correct']}/{len(per_sample)} correct)" if len(per_sample) > 1 else ""))

        # Every candidate in one evaluate_many (chunk_tasks=0), so builds never wait for the slowest of a chunk; a
        # task's rows are written as its last kernel finishes.
        step = chunk_tasks or max(1, len(todo_tasks))
        for i in range(0, len(todo_tasks), step):
            part = todo_tasks[i:i + step]
            jobs = list({measure.kernel_key(n, c): (n, ref_src[n], c) for n in part for m, _ in mains
                         for c, _ in samples.get((n, m), [])
                         if c and measure.kernel_key(n, c) not in measured}.values())  # each distinct kernel once

            def keep(j, res, jobs=jobs):  # as each job finishes (bench's worker thread), so Ctrl-C loses none
                if measure.is_oom(res) and not res.get("retried_after_oom"):
                    return                # retry_oom runs it again alone, then calls keep with that result
                name, _, code = jobs[j]
                with save_lock:
                    timed_now.append(j)
                    measured[measure.kernel_key(name, code)] = res
                    common.append_jsonl(kernels_path, dict(task=name, key=measure.kernel_key(name, code)[1],
                                                           result=res))
                    finish_task(name)
            with save_lock:
                for n in part:          # tasks with nothing left to measure (no kernel, or all measured before)
                    finish_task(n)
            results = measure.run_bench(jobs, build_workers, static_checks=True, on_result=keep, **bench_kw)
            measure.retry_oom(jobs, results, on_result=keep, static_checks=True, **bench_kw)

        # ---- the degenerate status of tasks that carry their own reference (or lack the tasks_file field)
        if not summarize_only:
            screen.screen_rows(tasks, measured, rows, own_ref, ref_src, res_path,
                               str(screen_degenerate) in ("True", "auto" if device.startswith("cuda") else "True"),
                               device, atol, rtol)

        # ---- phase 2: the baselines, trusted modules (static checks off), a chunk of tasks at a time: first the
        # compile baselines of the chunk into the shared cache in parallel, then every baseline timed one by one.
        # eager is the reference itself (1.0x); its time is the median ref_ms of the task's runs, and a task that has
        # none (everything else failed before timing) gets its reference timed alone (bench's reference_only).
        compile_env = baseline.cache_env(inductor_cache, compile_workers)  # the shared torch.compile cache, which
        forkserver.bind_writable([compile_env["TORCHINDUCTOR_CACHE_DIR"]])   # bubblewrap would hide from runners

        def median_ref_ms(name):
            times = [r["ref_ms"] for (t, m), r in rows.items() if t == name and m != "eager" and r.get("ref_ms")]
            return float(np.median(times)) if times else None
        baseline_todo = [n for n in order if not summarize_only and (any((n, b) not in rows for b in timed) or (
            "eager" in baseline_names and (n, "eager") not in rows))]
        if not summarize_only:
            print(f"phase 2: baselines of {len(baseline_todo)} tasks ({len(names) - len(baseline_todo)} with every "
                  f"row); compile cache {compile_env['TORCHINDUCTOR_CACHE_DIR']}"
                  + "".join(f"; {b} unavailable: {why}" for b, why in unavailable.items()))
        progress = tqdm(total=len(baseline_todo), desc="baselines")
        num_compiled = sum(b in baseline.COMPILED for b in timed)  # a chunk: one wave of compile warm-ups
        step = chunk_tasks or (max(1, compile_workers // num_compiled) if num_compiled else max(1, len(baseline_todo)))
        chunks = [baseline_todo[i:i + step] for i in range(0, len(baseline_todo), step)]

        def warm_chunk(part):
            jobs = [(n, b) for n in part for b in timed if b in baseline.COMPILED and (n, b) not in rows]
            if compile_workers > 0 and jobs:
                counts = baseline.warm([(n, ref_src[n], baseline.baseline_source(ref_src[n], b)) for n, b in jobs],
                                       device, compile_workers, timeout_s, inductor_cache)
                tqdm.write(f"warm-up of {len(jobs)} compile baselines: {counts}")

        def job_kw(name):
            kw = dict(extra_env=compile_env) if name in baseline.COMPILED else {}
            return dict(kw, flags_override={"cudnn_benchmark": True}) if name == "cudnn_benchmark" else kw

        def save(jobs):
            def on_result(i, res):
                name, method = jobs[i]
                with save_lock:
                    rows[(name, method)] = measure.record(name, method, res)
                    common.append_jsonl(res_path, rows[(name, method)])
                tqdm.write(f"{name} {method}: {rows[(name, method)]['status']} "
                           f"{rows[(name, method)]['speedup'] or 0:.2f}x ({res.get('eval_s') or 0:.0f} s)")
            return on_result
        warmer = ThreadPoolExecutor(1)  # the next chunk's compile warm-up runs while this chunk is timed
        warming = warmer.submit(warm_chunk, chunks[0]) if chunks else None
        try:
            for k, part in enumerate(chunks):
                warming.result()
                if overlap_warmup and k + 1 < len(chunks):
                    warming = warmer.submit(warm_chunk, chunks[k + 1])
                jobs = [(n, b) for n in part for b in timed if (n, b) not in rows]
                bench_jobs = [(n, ref_src[n], baseline.baseline_source(ref_src[n], b), job_kw(b)) for n, b in jobs]
                results = measure.run_bench(bench_jobs, build_workers, static_checks=False, on_result=save(jobs),
                                            **bench_kw)
                if any(measure.is_oom(r) for r in results):  # again alone, once the overlapping warm-up is done
                    warming.result()
                    measure.retry_oom(bench_jobs, results, on_result=save(jobs), static_checks=False, **bench_kw)
                # eager: the median ref_ms of the task's rows; the tasks without one (no row reached its timing: half
                # of the CUDA-L1 A100 release) get their reference timed alone (bench's reference_only), all of the
                # chunk in one evaluate_many
                eager = [n for n in part if "eager" in baseline_names and (n, "eager") not in rows]
                alone = [n for n in eager if median_ref_ms(n) is None]
                eager_jobs = [(n, ref_src[n], baseline.baseline_source(ref_src[n], "eager")) for n in alone]

                def save_eager(i, res):
                    with save_lock:
                        rows[(alone[i], "eager")] = measure.record(alone[i], "eager", dict(
                            res, speedup=1.0 if res.get("ref_ms") else None))
                        common.append_jsonl(res_path, rows[(alone[i], "eager")])
                results = measure.run_bench(eager_jobs, build_workers, static_checks=False, reference_only=True,
                                            on_result=save_eager, **bench_kw)
                measure.retry_oom(eager_jobs, results, on_result=save_eager, static_checks=False, reference_only=True,
                                  **bench_kw)
                for n in eager:
                    if n not in alone:
                        rows[(n, "eager")] = measure.record(n, "eager", dict(status="ok", correct=True, speedup=1.0,
                                                                             ref_ms=median_ref_ms(n)))
                        common.append_jsonl(res_path, rows[(n, "eager")])
                progress.update(len(part))
                if not overlap_warmup and k + 1 < len(chunks):
                    warming = warmer.submit(warm_chunk, chunks[k + 1])
        except BaseException:
            baseline.stop_warm()
            raise
        finally:
            warmer.shutdown(wait=False, cancel_futures=True)
        progress.close()
    except KeyboardInterrupt as e:
        interrupted = str(e) or "Ctrl-C"
        print(f"\nevaluate.py interrupted ({interrupted}): every row measured so far is kept in {eval_dir}; the "
              "report below covers them" + ("" if os.environ.get("CUDAL1_CHAINED") else "; rerun the same command "
                                            "to continue"), flush=True)

    # ---- the report
    report.write_report(eval_dir, rows, tasks, mains, baseline_names, unavailable, own_ref,
                        common.read_appended(runs_path) or [report.this_run()], config, time.time() - start_time)
    new = [k for k in rows if k[1] not in ("screen", "eager") and k not in measured_before]
    took = time.time() - start_time
    print(f"wrote {eval_dir}/results.jsonl, summary.md, summary.json, per_task.csv and plots in {took:.0f}s; "
          f"{len(timed_now)} distinct kernels measured by this run, {60 * len(timed_now) / max(took, 1e-9):.1f} per "
          f"minute (baselines not counted), making {len(new)} (task, method) rows")
    if interrupted:  # said again after the tables, which read as a whole report at a glance
        print(f"evaluate.py was interrupted: the report above is partial ({len(rows)} rows measured)", flush=True)
        sys.exit(130)
