"""
The degenerate-task screen (REFERENCE.md §3): which trivial outputs (zeros, a constant, the input) pass a task's
check, by bench.degenerate_screen. prepare.py screens its whole task set and times each eager reference too
(screen_tasks); evaluate.py screens only the tasks whose status it cannot tell otherwise (screen_rows).
bench is imported inside the functions, so that a test can put a fake one in sys.modules.
"""
import hashlib
import os

from tqdm import tqdm

import common
from evaluation import report


def screen_tasks(tasks, cache_path, bench_kw):
    """Add degenerate (bool, None where the screen failed), degenerate_passed (the trivial outputs that pass) and
    ref_ms (the eager reference timed against itself by bench, ms per call) to every task row. bench_kw: device,
    arch, num_correct_trials, time_budget_s, timeout_s, build_workers. Results are cached in cache_path (JSON lines)
    by task name, source hash and device."""
    import bench
    device = bench_kw["device"]

    def key(task):
        return f"{task['name']}|{hashlib.sha256(task['src'].encode()).hexdigest()[:16]}|{device}"
    cache = {r["key"]: r for r in common.read_jsonl(cache_path)} if os.path.exists(cache_path) else {}
    todo = [t for t in tasks if key(t) not in cache]
    if todo:
        print(f"screening {len(todo)} tasks (degenerate outputs, eager time) on {device}")
        # the reference against itself: `ModelNew` is the task's own Model, so bench times eager on both sides
        refs = bench.evaluate_many([(t["name"], t["src"], t["src"] + "\n\nclass ModelNew(Model):\n    pass\n")
                                    for t in todo], static_checks=False, **bench_kw)
        for task, ref in zip(tqdm(todo, desc="degenerate screen"), refs):
            found = bench.degenerate_screen(task["src"], task_name=task["name"], device=device, arch=bench_kw["arch"],
                                            num_correct_trials=bench_kw["num_correct_trials"],
                                            timeout_s=bench_kw["timeout_s"])
            row = dict(key=key(task), degenerate=found["degenerate"], degenerate_passed=found["passed"],
                       screen_status=found["status"], ref_ms=ref.get("ref_ms"), ref_status=ref["status"])
            common.append_jsonl(cache_path, row)
            cache[row["key"]] = row
    for task in tasks:
        row = cache[key(task)]
        task.update(degenerate=row["degenerate"], degenerate_passed=row["degenerate_passed"], ref_ms=row["ref_ms"])
    print(f"screen: {sum(bool(t['degenerate']) for t in tasks)} of {len(tasks)} tasks accept a trivial output: "
          + (", ".join(f"{t['name']} ({'/'.join(t['degenerate_passed'])})" for t in tasks if t["degenerate"]) or "-"))
    failed = [t["name"] for t in tasks if t["degenerate"] is None]
    if failed:  # unknown, not clean: the screen itself failed (the reference crashed, ran out of memory, ...)
        print(f"screen FAILED on {len(failed)} tasks, degenerate unknown (causes in {cache_path}): "
              + ", ".join(failed[:10]) + (" ..." if len(failed) > 10 else ""))


def screen_rows(tasks, measured, rows, own_ref, ref, res_path, screen_unknown, device, atol, rtol):
    """Add a "screen" row to rows (and to results.jsonl at res_path) for the tasks whose degenerate status has no
    other source (report.degenerate_of): from bench's own screen where a kernel of this run reached that task's
    judge (a `degenerate` list in its result; measured: {(task, kernel key): bench result}), else, with
    screen_unknown, from bench.degenerate_screen of the task's reference (ref: {task: source}) at atol, rtol."""
    for task in tasks:
        passing = next((r["degenerate"] for (name, _), r in measured.items()
                        if name == task["name"] and isinstance(r.get("degenerate"), list)), None)
        if passing is not None and (task["name"], "screen") not in rows:
            rows[(task["name"], "screen")] = dict(task=task["name"], level=task["level"], method="screen",
                                                  degenerate=bool(passing), passed=passing, status="ok", error="")
            common.append_jsonl(res_path, rows[(task["name"], "screen")])
    unknown = [t for t in tasks if report.degenerate_of(t, t["name"] in own_ref, {})[0] is None
               and (t["name"], "screen") not in rows]
    if not (unknown and screen_unknown):
        return
    import bench
    for task in tqdm(unknown, desc="degenerate screen"):
        try:
            found = bench.degenerate_screen(ref[task["name"]], task_name=task["name"], device=device, atol=atol,
                                            rtol=rtol)
        except Exception as e:
            found = dict(degenerate=None, status="crash", error=f"{type(e).__name__}: {e}")
        rows[(task["name"], "screen")] = dict(task=task["name"], level=task["level"], method="screen",
                                              **{k: found.get(k) for k in ("degenerate", "passed", "status", "error")})
        common.append_jsonl(res_path, rows[(task["name"], "screen")])
