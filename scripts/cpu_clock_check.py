"""The CPU device's clock check, measured (bench.py `clock_mismatch`; the CI failure of stop 15).

    python scripts/cpu_clock_check.py [--repeats 2]

Evaluates, `--repeats` times each, with bench.evaluate_many on the CPU device: the honest control (torch.matmul),
two forged-time attacks (tests/hacks/judge_forge_json.py, judge_gc_objects.py) and a modest one that claims the real
time / 1.4 (judge_clock_shave.py: under the limit, it must earn under 1.5x, the CPU tests' no-reward line, from the
CPU-time floor) on the heavy task
(tests/fixtures/cpu_task_matmul.py), and the reference op itself as a candidate on the three tiny CPU tasks
(data/tiny_cpu/tasks). Prints one line per evaluation: verdict, excess_ms (unexplained CPU ms per call beyond the
claim, less the reference's overhead), limit_ms, overhead_ms, the claimed and the counted ms per call, the speedup.
Honest ones must stay below their limit, the forged-time attacks above it. Exit status 1 if any does not.
"""
import argparse, os, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import bench  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=2, help="evaluations of each candidate")
    a = ap.parse_args()
    fix, hacks = os.path.join(ROOT, "tests", "fixtures"), os.path.join(ROOT, "tests", "hacks")
    heavy = open(os.path.join(fix, "cpu_task_matmul.py")).read()
    jobs = [("control", heavy, open(os.path.join(fix, "cand_plain_matmul.py")).read(), dict(), "honest")]
    for n in ("judge_forge_json", "judge_gc_objects"):
        jobs.append((n, heavy, open(os.path.join(hacks, n + ".py")).read(), dict(static_checks=False), "attack"))
    jobs.append(("judge_clock_shave", heavy, open(os.path.join(hacks, "judge_clock_shave.py")).read(),
                 dict(static_checks=False), "shave"))
    for t in ("swish", "new_gelu", "rmsnorm"):
        task = open(os.path.join(ROOT, "data", "tiny_cpu", "tasks", t + ".py")).read()
        cand = task.replace("class Model(", "class ModelNew(").replace("super(Model, self)", "super()")
        jobs.append((f"reference_as_candidate:{t}", task, cand, dict(static_checks=False), "honest"))
    jobs = jobs * a.repeats
    res = bench.evaluate_many([j[:4] for j in jobs], device="cpu", num_correct_trials=2, time_budget_s=0.1,
                              timeout_s=300)
    bad = 0
    for (name, _, _, _, kind), r in zip(jobs, res):
        c = r.get("clock") or {}
        flagged = r.get("hack") == "clock_mismatch"
        if kind == "shave":
            wrong = r["status"] == "ok" and (r.get("speedup") or 0.0) >= 1.5
        else:
            wrong = flagged if kind == "honest" else not flagged
        bad += wrong
        nums = " ".join(f"{k} {c.get(k + '_ms', float('nan')):7.2f}"
                        for k in ("excess", "limit", "overhead", "claimed"))
        sp = f"{r['speedup']:.3f}x" if r.get("speedup") else "-"
        print(f"{name:34} {kind:6} {r['status']:8} {r.get('hack') or '':15} {nums} counted "
              f"{r.get('cand_ms') or float('nan'):7.2f} ms {sp:>8}{'  WRONG' if wrong else ''}")
    print(f"{len(jobs) - bad} of {len(jobs)} as expected")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
