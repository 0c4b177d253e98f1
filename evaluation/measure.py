"""
How evaluate.py measures: bench.py calls that never stop the run, and the rows they become.

run_bench sends a batch of jobs to ONE bench.evaluate_many call (builds in parallel, every GPU times), falling back to
one bench.evaluate per job should that call fail; retry_oom runs again alone every job that ran out of CUDA memory
beside the other children of the batch. record turns a bench result into a results.jsonl row, pick_best takes the
best of N samples, read_results reads the rows an earlier run wrote, kernel_key names a distinct kernel.
bench is imported inside the functions, so that a test can put a fake one in sys.modules.
"""
import hashlib

from tqdm import tqdm

import common
from evaluation import report
from evaluation import taskset


def kernel_key(task, code):
    """(task, 16 hex digits of sha256(code)): one distinct kernel, timed once for every method that wrote it."""
    return task, hashlib.sha256(code.encode()).hexdigest()[:16]


def passed(res):
    """Did this bench result pass: correct, status ok (a "hack" record may carry a speedup) and a usable speedup?"""
    return bool(res.get("correct") and report.good(res.get("speedup")) and res.get("status", "ok") == "ok")


def pick_best(results):
    """Best of N: the passing sample with the highest speedup, else the first failure (None if no sample)."""
    ok = [r for r in results if passed(r)]
    return max(ok, key=lambda r: r["speedup"]) if ok else (results[0] if results else None)


def record(task, method, res, **extra):
    """One results.jsonl row from a bench result (or a stub for a missing or unparsable kernel): the result's keys,
    its error cut to 2000 characters, success, and speedup (x) only where the result passed; extra keys last."""
    row = dict(task=task, level=taskset.level_of(task), method=method)
    row.update({k: v for k, v in res.items() if k != "error"})
    row["error"] = (res.get("error") or "")[:2000] or None
    row["success"] = passed(res)
    row["speedup"] = res.get("speedup") if row["success"] else None
    row.update(extra)
    return row


def read_results(path):
    """{(task, method): row} of results.jsonl, the last row of a pair winning (common.read_appended: a line cut short
    by a kill is skipped)."""
    return {(r["task"], r["method"]): r for r in common.read_appended(path)
            if isinstance(r, dict) and {"task", "method"} <= set(r)}


def bench_one(name, ref_src, cand_src, **kw):
    """bench.evaluate of one job; an exception becomes a "crash" result, so one task never stops the run."""
    import bench
    try:
        return bench.evaluate(ref_src, cand_src, task_name=name, **kw)
    except Exception as e:
        return dict(status="crash", correct=False, speedup=None, error=f"{type(e).__name__}: {e}")


def run_bench(jobs, build_workers=0, on_result=None, **kw):
    """bench results for (task_name, task_src, candidate_src[, per-job bench keywords]) jobs, in order: ONE
    evaluate_many call (build_workers: parallel builds, 0 = its default); on_result(i, result) as each finishes.
    Should that call itself fail, the jobs run one by one, and a job that raises becomes a "crash" result."""
    if not jobs:
        return []
    import bench
    try:
        results = list(bench.evaluate_many(jobs, build_workers=build_workers or None, progress=True,
                                           on_result=on_result, **kw))
        if len(results) != len(jobs):
            raise RuntimeError(f"{len(results)} results for {len(jobs)} jobs")
        return results
    except Exception as e:
        print(f"bench.evaluate_many failed ({type(e).__name__}: {e}); evaluating one by one")
    results = []
    for i, (name, ref_src, cand_src, *job_kw) in enumerate(tqdm(jobs, desc="bench")):
        results.append(bench_one(name, ref_src, cand_src, **dict(kw, **(job_kw[0] if job_kw else {}))))
        if on_result is not None:
            on_result(i, results[-1])
    return results


def is_oom(res):
    """Did this bench result fail on CUDA memory (an out-of-memory error in the child)?"""
    return "OutOfMemoryError" in str(res.get("error_type") or "") or "CUDA out of memory" in str(res.get("error") or "")


def retry_oom(jobs, results, on_result=None, **kw):
    """Runs again, one at a time and alone (bench.evaluate: no other child of this run on the GPU), every job whose
    result is a CUDA out-of-memory error: with several children per GPU and warm-up workers, a task with tens of GB
    of inputs can run out of memory only because others held some (level1/4's 8 GiB matrix on the H200).
    Returns the results with those replaced, marked retried_after_oom; on_result(i, result) for each re-run."""
    results = list(results)
    for i, (job, res) in enumerate(zip(jobs, results)):
        if is_oom(res):
            name, ref_src, cand_src, *job_kw = job
            results[i] = bench_one(name, ref_src, cand_src, **dict(kw, **(job_kw[0] if job_kw else {})))
            results[i]["retried_after_oom"] = True
            tqdm.write(f"{name}: out of GPU memory beside other processes; alone: {results[i].get('status')}")
            if on_result is not None:
                on_result(i, results[i])
    return results
