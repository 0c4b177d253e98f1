"""bench.py: the evaluator. It builds a candidate `ModelNew`, checks it against a KernelBench reference `Model`, times
both, and returns one flat result record (a dict) that no candidate code ever touched.

    python bench.py TASK.py CANDIDATE.py [--device cuda|cpu] [--protocol strict] [--json]   # --help: every flag

A task is a KernelBench module (`Model`, `get_inputs()`, `get_init_inputs()`); a candidate is a module defining
`ModelNew` with the same constructor, usually building CUDA with `torch.utils.cpp_extension.load_inline`.
API: evaluate (one candidate), evaluate_many (a batch: parallel builds, one timed job per GPU at a time), build
(the build step alone), degenerate_screen (REFERENCE.md §3).

One evaluation: a static scan of the source; the build (load_inline, through a build cache) in a throw-away
process; then, in a fresh runner process under the GPU's lock, the reference timed, the candidate imported,
correctness trials compared by the judge (a process that never runs candidate code), the candidate's timed calls,
the speedup and the verdict. harness/README.md has the processes, what each may trust, and what is not covered.

The record's verdict, `status`: ok | static | compile_error | runtime_error | incorrect | timeout | crash | hack
(reward only "ok"). `hack` names the kind; the static scan's: side_stream, l2_persistence, background_thread,
precision_downgrade, harness_tampering, inherits_reference; at run time: lazy_output, output_aliases_input,
input_mutation, backend_flags, fallback, output_changed_after_return, timed_output_mismatch, precision_downgrade,
patched_timer_or_checker, impossible_time, clock_mismatch, harness_tampering (REFERENCE.md §4).
The fields a user reads: status, hack, correct, speedup (ref_ms / cand_ms, only when correct), speedup_rounded
(toward 1.00 at two decimals, as CUDA-L1), ref_ms and cand_ms (the protocol's statistic, ms per call), error and
error_type, compile_s. Every other field is documented in harness/record.py.
Protocols (how a call is timed; every protocol runs every check): "strict" (default; fresh inputs every call, L2
flushed, median), "kernelbench" (100 calls on the same inputs, mean), "cudal1" (7 rounds x 10 calls, no flush, mean of
round means); harness/README.md gives the details.
"""
import argparse, dataclasses, json, os, sys, time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:          # the fork server runs with `python -P` (no script folder first on sys.path)
    sys.path.append(HERE)
from harness import batch, options, record, runner, runner_steps, scan  # noqa: E402
from harness.session import Session  # noqa: E402
from harness.workers import WorkerError, judge_for, gpu_lock  # noqa: E402


def evaluate(task_src: str, candidate_src: str, *, task_name: str = "task", device: str = "cuda",
             protocol: str = "strict", atol: float = 1e-2, rtol: float = 1e-2, timeout_s: float = 300.0,
             **kw) -> dict:
    """Builds, checks and times one candidate against its task; returns the result record (module docstring).

    protocol: one of options.PROTOCOLS; atol/rtol: isclose tolerances; timeout_s: wall seconds for the whole
    evaluation, build included, waiting for the GPU not included. kw: the other keywords of options.make,
    documented in harness/options.py (num_correct_trials, arch, build_root, static_checks, time_budget_s,
    remeasure_above, check_only, flags_override, extra_env, reference_only, clock). Raises ValueError for a bad argument
    (TypeError for an unknown one); never raises for a bad candidate."""
    gpu = kw.pop("_gpu", None)
    opts = options.make(device=device, protocol=protocol, atol=atol, rtol=rtol, timeout_s=timeout_s, **kw)
    return _evaluate(task_name, task_src, candidate_src, opts, gpu)


def _evaluate(task_name, task_src, candidate_src, opts, gpu=None, live=None, built=False):
    """One candidate's record under `opts` (options.Options); built: its builds were made ahead (evaluate_many),
    else they are made here first (a failed build is the verdict). live: a batch's LiveWorkers."""
    t0 = time.perf_counter()
    res = record.blank(task_name, candidate_src, opts.protocol, opts.device)
    res["flags_override"] = opts.flags_override
    # 1. the static scan: a first filter, before anything runs (harness/scan.py)
    verdict = scan.static_check(candidate_src, task_src) if opts.static_checks else None
    # 2. the build: the candidate imported in a throw-away runner; its load_inline calls fill the build cache
    build_here = not (verdict or built or opts.build_only or opts.check_only or opts.reference_only)
    built_ahead = _build_ahead(task_src, candidate_src, opts, live) if build_here else None
    if verdict:
        res.update(status=verdict[0], hack=verdict[1], error=verdict[2],
                   error_type="SyntaxError" if verdict[0] == "compile_error" else "StaticCheck")
    elif built_ahead and built_ahead["status"] in ("compile_error", "timeout"):
        res.update({k: built_ahead.get(k) for k in ("status", "error", "error_type", "compile_s")})
    else:
        # 3. one runner under the GPU's lock: the reference timed, the candidate imported (a cache hit), ModelNew,
        # the correctness trials (compared by the judge), the timed calls, the parent's clock check, the speedup
        # and the verdict (harness/session.py)
        try:
            judge_worker = None if opts.build_only else judge_for(opts.device, gpu, opts.build_root)
            Session(res, task_src, candidate_src, opts, gpu, gpu_lock(opts.device, gpu), judge_worker, live).run()
        except Exception as e:                            # e.g. the fork server or the judge could not start
            res.update(status="crash", error=runner.truncate(f"evaluator error: {type(e).__name__}: {e}"),
                       error_type=type(e).__name__)
        if built_ahead and built_ahead.get("compile_s"):  # the builds made here count as this record's
            res["compile_s"] = built_ahead["compile_s"] + (res.get("compile_s") or 0.0)
    res["error"] = record.scrub_paths(res["error"], opts.build_root)
    res["eval_s"] = time.perf_counter() - t0
    return res


def _build_ahead(task_src, candidate_src, opts, live=None, split=True, place=0):
    """The candidate's builds made in a throw-away runner (import, ModelNew on the meta device) for its timed runner
    to find (under the GPU's lock); the precompiled headers first, here (runners only read them). split=False: not
    the split build (batch.split_builds). place: its place in the batch's build queue, added to its BUILD_NICE."""
    build_opts = dataclasses.replace(opts, build_only=True, timeout_s=max(600.0, opts.timeout_s), static_checks=False,
                                     build_nice=min(19, runner_steps.BUILD_NICE + max(0, int(place))))
    if not split:                                   # (extra_env is for trusted callers: this one is ours)
        build_opts = dataclasses.replace(build_opts, extra_env=dict(opts.extra_env or {}, CUDAL1_SPLIT="0"))
    if batch.prebuild_wanted(opts.device, [candidate_src]):   # (returns at once when made or being made)
        batch.prebuild_pch(opts.build_root, None, split)
    return _evaluate("build", task_src, candidate_src, build_opts, live=live)


def build(candidate_src, *, task_src="", device="cuda", arch=None, build_root=None, timeout_s=600.0) -> dict:
    """Build only: imports the candidate in a runner (its load_inline calls fill the build cache) and, given the
    task's source, makes ModelNew(*get_init_inputs()) on the meta device (builds made in __init__), then ends it.
    Returns {candidate_hash, status (ok | compile_error | runtime_error | timeout | crash), compiled, error,
    error_type, compile_s (s)}; runtime_error means the import failed for a reason other than a build."""
    opts = dataclasses.replace(options.make(device, build_root=build_root, arch=arch, timeout_s=timeout_s,
                                            static_checks=False), build_only=True)
    r = _evaluate("build", task_src, candidate_src, opts)
    return {k: r.get(k) for k in ("candidate_hash", "status", "compiled", "error", "error_type", "compile_s")}


def evaluate_many(jobs, *, build_workers=None, progress=False, gpus=None, overlap=True, on_result=None,
                  per_gpu=2, **kw):
    """evaluate() for [(task_name, task_src, candidate_src[, overrides]), ...]; results in the same order.
    kw: evaluate()'s keywords for every job; overrides: a dict of them for that job only.

    Builds every distinct candidate ahead, `build_workers` at a time (default: the CPU count less 2 per GPU when
    overlapping, so the timed jobs keep CPUs of their own), in throw-away runners that fill the build cache; then
    evaluates each job on one of `gpus` (CUDA_VISIBLE_DEVICES ids; default every visible GPU for device="cuda"):
    `per_gpu` jobs per GPU are alive at once, but only one at a time holds the GPU's lock for its checks and
    timing, so the next one's start (fork, import, build) overlaps the current one's GPU work. overlap=True
    starts a job as soon as its own build is done (RL should not wait for the slowest compile); overlap=False
    waits for every build. on_result(i, result) is called as each job finishes (from a worker thread). A
    candidate whose build failed or timed out is not built again. One job's failure never stops the others.
    Ctrl-C / SIGTERM: no new evaluation starts, builds in flight are killed, evaluations in flight get
    batch.INTERRUPT_GRACE_S (env CUDAL1_INTERRUPT_GRACE_S) to finish (their results reach on_result), the rest are
    killed and not recorded, then the interrupt goes on. Raises as evaluate() does for a bad keyword."""
    jobs = [tuple(j) + ({},) if len(j) == 3 else tuple(j) for j in jobs]
    opts = []
    for j in jobs:                                        # a wrong keyword fails here, not once per job
        job_kw = dict(kw, **j[3])
        job_kw.pop("_gpu", None)
        opts.append(options.make(**job_kw))
    return batch.run(jobs, opts, kw.get("device", "cuda"), build_ahead=_build_ahead, evaluate_one=_evaluate,
                     build_workers=build_workers, progress=progress, gpus=gpus, overlap=overlap,
                     on_result=on_result, per_gpu=per_gpu)


def degenerate_screen(task_src: str, *, task_name: str = "task", device: str = "cuda", atol: float = 1e-2,
                      rtol: float = 1e-2, num_correct_trials: int = 5, timeout_s: float = 600.0,
                      build_root: str | None = None, arch: str | None = None) -> dict:
    """REFERENCE.md §3: does a trivial output pass this task's correctness check?

    In the judge: the reference on the seeds of the correctness trials, and each of judge.TRIVIAL_OUTPUTS (zeros;
    constant = the reference's output on other inputs; mean = its mean everywhere; input = the first input
    reshaped) through the same comparison a candidate gets. Cached per task source. Returns {task, degenerate
    (bool; None if the screen itself failed), passed, results ({name: "passed" | "incorrect: ..." | "n/a: ..."}),
    status (ok | runtime_error | crash), error, trials, atol, rtol, device, device_name, eval_s}."""
    t0 = time.perf_counter()
    res = dict(task=task_name, degenerate=None, passed=[], results={}, status="crash", error="", error_type="",
               trials=0, atol=atol, rtol=rtol, device=device, device_name="cpu" if device == "cpu" else None)
    opts = options.make(device, "strict", atol, rtol, num_correct_trials, timeout_s, arch, build_root)
    try:
        judge_worker = judge_for(device, None, opts.build_root)
        key = record.source_hash(task_src) + record.source_hash(json.dumps([device, "strict", num_correct_trials,
                                                                            atol, rtol]))
        with gpu_lock(device, None):
            info, _ = judge_worker.ask(dict(op="setup", task_key=key, task_src=task_src, atol=atol, rtol=rtol,
                                            trials=num_correct_trials, protocol="strict", screen=True), timeout_s)
        res.update(status="ok", results=info["screen"], trials=len(info["seeds"]),
                   device_name=info.get("device_name", res["device_name"]))
        res["passed"] = [k for k, v in info["screen"].items() if v == "passed"]
        res["degenerate"] = bool(res["passed"])
    except (RuntimeError, WorkerError) as e:
        res.update(status="runtime_error", error=runner.truncate(str(e)), error_type=type(e).__name__)
    res["eval_s"] = time.perf_counter() - t0
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description="Check and time a KernelBench candidate against its task.")
    ap.add_argument("task", help="task module (Model, get_inputs, get_init_inputs)")
    ap.add_argument("candidate", help="candidate module (ModelNew)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", choices=["cuda", "cpu"],
                    help="where both models run (default: cuda where torch sees a GPU, else cpu)")
    ap.add_argument("--arch", default=None, help="TORCH_CUDA_ARCH_LIST for nvcc, e.g. 9.0")
    ap.add_argument("--json", action="store_true", help="print the whole result record as JSON")
    ap.add_argument("--timeout_s", type=float, default=300.0, help="seconds for the whole evaluation")
    ap.add_argument("--num_correct_trials", type=int, default=None, help="correctness trials (default: the protocol's)")
    ap.add_argument("--no_static_checks", action="store_true", help="for trusted code only")
    ap.add_argument("--build_root", default=None, help="build cache (default $CUDAL1_BUILD_ROOT or ~/.cache/cudal1)")
    ap.add_argument("--clock", default="gate", choices=options.CLOCKS, help="gate: this process's clock alone, the "
                    "inputs sealed until the window (strict protocol on a GPU; elsewhere claims count); claims")
    ap.add_argument("--protocol", default="strict", choices=options.PROTOCOLS,
                    help="strict (fresh inputs every call, L2 flushed, median), kernelbench (100 calls on the "
                         "same inputs, mean), cudal1 (7 rounds x 10 calls, no flush, mean of round means)")
    ap.add_argument("--check_only", action="store_true", help="correctness only, no timing")
    ap.add_argument("--no_screen", action="store_true", help="no degenerate screen (REFERENCE.md §3) if none ran")
    args = ap.parse_args(argv)
    if missing := [f"{role} {path}" for role, path in (("task", args.task), ("candidate", args.candidate))
                   if not os.path.isfile(path)]:
        sys.exit(f"error: no such file: {'; '.join(missing)} (usage: python bench.py TASK.py CANDIDATE.py)")
    task_src, candidate_src = open(args.task).read(), open(args.candidate).read()
    if problem := scan.task_problem(task_src):     # e.g. TASK and CANDIDATE swapped: one line, nothing run
        sys.exit(f"error: {args.task}: {problem} (usage: python bench.py TASK.py CANDIDATE.py)")
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("error: --device cuda, but torch sees no CUDA GPU (a CPU-only torch, or no driver); use --device cpu")
    name = os.path.basename(args.task)[:-3]
    res = evaluate(task_src, candidate_src, task_name=name, device=args.device, arch=args.arch,
                   timeout_s=args.timeout_s, num_correct_trials=args.num_correct_trials, protocol=args.protocol,
                   static_checks=not args.no_static_checks, build_root=args.build_root, check_only=args.check_only,
                   clock=args.clock)
    line = record.screen_line(res, args.no_screen, lambda: degenerate_screen(
        task_src, task_name=name, device=args.device, arch=args.arch, build_root=args.build_root))
    print(json.dumps(res) if args.json else record.summary(dict(res, degenerate=None)) + "\n" + line)
    return 0 if res["status"] == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
