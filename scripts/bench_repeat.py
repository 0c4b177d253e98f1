"""Timing repeatability of bench.py: the same candidate evaluated `--repeats` times, each in its
own child process (bench.evaluate always spawns one), on tasks of >= 1 ms; prints the spread of the speedups
(max/min - 1, in %) per candidate and writes every record to --out (JSON).

    python scripts/bench_repeat.py --out results/bench/repeat.json [--repeats 5] [--kb DIR]

Candidates: tests/legit/<name>.py against their `task:` (default: sigmoid on level1/21_Sigmoid, ~3.5 ms, and
gemm_mul_leakyrelu on level2/12, a 1024x8192x8192 GEMM). KernelBench: --kb, $KERNELBENCH_DIR or
../shared/kernelbench. Builds once (evaluate_many's phase 1), then the evaluations run one after another.
"""
import argparse, json, os, re, sys, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import bench  # noqa: E402
from harness.options import PROTOCOLS  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--candidates", default="sigmoid,gemm_mul_leakyrelu", help="names in tests/legit")
    ap.add_argument("--kb", default=os.environ.get("KERNELBENCH_DIR") or
                    os.path.join(ROOT, "..", "shared", "kernelbench"))
    ap.add_argument("--protocol", default="strict", choices=PROTOCOLS)
    ap.add_argument("--time_budget_s", type=float, default=2.0)
    a = ap.parse_args()
    jobs = []
    for name in a.candidates.split(","):
        cand = open(os.path.join(ROOT, "tests", "legit", name + ".py")).read()
        task = re.search(r"^(?:\"\"\")?task: (\S+)", cand, re.M).group(1)
        path = os.path.join(a.kb, task + ".py")
        if not os.path.exists(path):
            sys.exit(f"error: {path} not found (pass --kb or set KERNELBENCH_DIR)")
        jobs += [(name, open(path).read(), cand)] * a.repeats
    t0 = time.time()
    res = bench.evaluate_many(jobs, device="cuda", protocol=a.protocol, time_budget_s=a.time_budget_s,
                              gpus=[os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]], progress=True)
    summary = {}
    for name in a.candidates.split(","):
        rs = [r for r in res if r["task"] == name]
        sp = [r["speedup"] for r in rs if r["status"] == "ok"]
        ref = [r["ref_ms"] for r in rs if r["status"] == "ok"]
        cand = [r["cand_ms"] for r in rs if r["status"] == "ok"]
        spread = lambda v: (max(v) / min(v) - 1) * 100 if len(v) == len(rs) and v else None
        summary[name] = dict(ok=len(sp), runs=len(rs), speedups=sp, ref_ms=ref, cand_ms=cand,
                             speedup_spread_pct=spread(sp), ref_ms_spread_pct=spread(ref),
                             cand_ms_spread_pct=spread(cand), statuses=[r["status"] for r in rs])
        s = summary[name]
        fmt = lambda x: "n/a" if x is None else f"{x:.2f}%"
        print(f"{name:<22} {s['ok']}/{s['runs']} ok  speedups {' '.join(f'{x:.3f}' for x in sp)}  spread "
              f"{fmt(s['speedup_spread_pct'])} (ref_ms {fmt(s['ref_ms_spread_pct'])}, cand_ms "
              f"{fmt(s['cand_ms_spread_pct'])}; median ref {sorted(ref)[len(ref) // 2] if ref else 0:.3f} ms)")
    worst = max((s["speedup_spread_pct"] for s in summary.values() if s["speedup_spread_pct"] is not None),
                default=None)
    print(f"SUMMARY repeat: {a.repeats} runs per candidate, protocol {a.protocol}, worst speedup spread "
          f"{'n/a' if worst is None else f'{worst:.2f}%'} (target: within +-2%, i.e. spread <= 4%), "
          f"{time.time() - t0:.0f} s")
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    json.dump(dict(summary=summary, worst_spread_pct=worst, protocol=a.protocol, results=res), open(a.out, "w"),
              indent=1)


if __name__ == "__main__":
    main()
