"""Diagnostics for two GPU timing faults: a short kernel's strict time inflated by idle gaps between calls, and a
false clock_mismatch on a large elementwise task.

    python scripts/diag_clock.py clock [--spins 40,200] [--gaps_ms 0,3]      # runner.Clock alone, no bench
    CUDAL1_CLOCK_TRACE=1 python scripts/diag_clock.py swish                  # one bench.evaluate, every timed call

1. `clock`: the strict protocol's time of timing_accuracy.py's pairs (4 elementwise kernels vs 1) measured by
   runner.Clock in this process, with fresh inputs every call, for each spin length (us) and each idle gap between
   calls (ms: bench's calls are separated by socket round trips and deliveries), next to the kernels' device time
   from torch.profiler. Does an idle host or GPU between calls inflate a short kernel's strict time, and does a
   longer spin hide it?
2. `swish`: bench.evaluate of tests/fixtures/gpu_swish_fused.py on KernelBench level1/25_Swish (6.4 GB tensors),
   with CUDAL1_CLOCK_TRACE=1: the parent's clock per timed call, (claimed ms, wall ms), both sides, so the overhead
   of the candidate's calls can be compared with the reference's call by call (a false clock_mismatch was seen there).
   CUDAL1_JUDGE_TRIM=0 turns off the judge's release of cached GPU memory between commands, for comparison.
"""
import argparse, json, os, statistics, sys, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import torch  # noqa: E402

from harness import runner  # noqa: E402


def clock(a):
    from timing_accuracy import device_spans_us
    dev = torch.device("cuda")
    ref = lambda x: (((x * 1.5) + 0.25) * 0.5) - 0.125   # noqa: E731
    cand = lambda x: x * 0.75                              # noqa: E731
    rows = []
    for kib in [int(k) for k in a.sizes_kib.split(",")]:
        n = kib * 256
        x = torch.rand(n, device=dev)
        flush_buf = torch.empty(2 * torch.cuda.get_device_properties(dev).L2_cache_size, dtype=torch.uint8, device=dev)
        dev_us = {name: device_spans_us(fn, x, flush_buf.zero_)[0] for name, fn in (("ref", ref), ("cand", cand))}
        for spin in [float(s) for s in a.spins.split(",")]:
            runner.SPIN_US = spin
            c = runner.Clock(dev, "strict")
            for gap in [float(g) for g in a.gaps_ms.split(",")]:
                got = {}
                for name, fn in (("ref", ref), ("cand", cand)):
                    ms = []
                    for i in range(a.calls):
                        inp = [torch.rand(n, device=dev)]
                        if gap:
                            torch.cuda.synchronize()
                            time.sleep(gap / 1e3)
                        ms.append(c.call(lambda t: fn(t), inp)[0] * 1e3)
                    got[name] = statistics.median(ms)
                row = dict(kib=kib, spin_us=spin, gap_ms=gap, ref_dev_us=dev_us["ref"], cand_dev_us=dev_us["cand"],
                           ref_strict_us=got["ref"], cand_strict_us=got["cand"],
                           true_ratio=dev_us["ref"] / dev_us["cand"], strict_ratio=got["ref"] / got["cand"])
                row["err_pct"] = 100 * (row["strict_ratio"] / row["true_ratio"] - 1)
                rows.append(row)
                print(f"{kib:>7} KiB spin {spin:>5.0f} us gap {gap:>3.0f} ms: ref {got['ref']:7.1f} us (device "
                      f"{dev_us['ref']:6.1f}), cand {got['cand']:7.1f} us (device {dev_us['cand']:6.1f}), ratio "
                      f"{row['strict_ratio']:.3f} vs {row['true_ratio']:.3f} ({row['err_pct']:+.1f}%)", flush=True)
    return rows


def swish(a):
    import bench
    from harness import record
    kb = os.environ.get("KERNELBENCH_DIR") or os.path.join(ROOT, "..", "shared", "kernelbench")
    task = open(os.path.join(kb, "level1", "25_Swish.py")).read()
    cand = open(os.path.join(ROOT, "tests", "fixtures", "gpu_swish_fused.py")).read()
    out = []
    for i in range(a.repeats):
        r = bench.evaluate(task, cand, device="cuda", num_correct_trials=2, time_budget_s=1.0, timeout_s=600)
        c = r.get("clock") or {}
        tr = c.pop("trace", {})
        over = {k: [w - m for m, w in v] for k, v in tr.items()}
        print(f"run {i}: {record.summary(r)} clock {c} phases {r.get('phase_s')}", flush=True)
        for k, v in over.items():
            print(f"  {k}: overhead ms min {min(v):.3f} median {statistics.median(v):.3f} max {max(v):.3f}; "
                  f"first (claimed, wall): {tr[k][:6]}", flush=True)
        out.append(dict(summary=record.summary(r), clock=c, trace=tr, phase_s=r.get("phase_s")))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["clock", "swish"])
    ap.add_argument("--sizes_kib", default="4096,16384,65536")
    ap.add_argument("--spins", default="40,200", help="spin lengths to try (us)")
    ap.add_argument("--gaps_ms", default="0,3", help="idle gaps between calls to try (ms)")
    ap.add_argument("--calls", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=1, help="swish: evaluations")
    ap.add_argument("--out", default="", help="JSON file to write")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("error: scripts/diag_clock.py needs a CUDA GPU")
    res = clock(a) if a.what == "clock" else swish(a)
    if a.out:
        json.dump(res, open(a.out, "w"), indent=1, default=str)


if __name__ == "__main__":
    main()
