"""Timing accuracy of bench.py's protocols against device time measured independently.

    python scripts/timing_accuracy.py --out results/bench/timing_accuracy.json

Pairs of known device-time ratio: the reference runs 4 elementwise kernels over N floats (((x * 1.5) + 0.25) * 0.5
- 0.125), the candidate one (x * 0.75, the same function), for N from 4 KiB to 256 MiB of input. Ground truth:
torch.profiler's kernel records (CUPTI, every stream) of each model in this process, with the L2 flushed before
every call as bench does; a call's device time is the sum of its kernels' durations (the span from its first
kernel's start to its last kernel's end, which adds the gaps where the GPU waited for the host, is recorded too).
bench.evaluate then times each pair
under "strict" and "kernelbench" (with --clock=gate also under strict with clock="gate", harness/gate.py: the old
and the new clock side by side). Also the fixed cost of one strict call: runner.Clock on a call that launches one
empty-ish kernel (1 float), against that kernel's own device time. Prints a markdown table (also in --out's .md).
"""
import argparse, json, os, statistics, sys, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import torch  # noqa: E402

import bench  # noqa: E402
from harness import runner  # noqa: E402

TASK = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        y = x * 1.5
        y = y + 0.25
        y = y * 0.5
        return y - 0.125


def get_inputs():
    return [torch.rand({n})]


def get_init_inputs():
    return []
'''
CAND = '''import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x * 0.75
'''
SIZES_KIB = [4, 64, 1024, 4096, 16384, 65536, 262144]


def device_spans_us(fn, x, flush, calls=30):
    """(median device time, median span, calls): per call of fn(x), the sum of its kernels' durations and the span
    from its first kernel's start to its last kernel's end (us), from torch.profiler's CUDA records."""
    from torch.profiler import ProfilerActivity, profile
    for _ in range(3):
        fn(x)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            flush()
            torch.cuda.synchronize()
            fn(x)
            torch.cuda.synchronize()
    kernels = sorted((e.time_range.start, e.time_range.end, e.name) for e in prof.events()
                     if e.device_type == torch.autograd.DeviceType.CUDA and "memcpy" not in e.name.lower()
                     and "memset" not in e.name.lower())
    groups, cur = [], None
    for start, end, name in kernels:
        if "fill" in name.lower():                      # the flush: a call starts after it
            cur = []
            groups.append(cur)
        elif cur is not None:
            cur.append((start, end))
    spans = [max(e for _, e in g) - min(s for s, _ in g) for g in groups if g]
    busy = [sum(e - s for s, e in g) for g in groups if g]
    return statistics.median(busy), statistics.median(spans), len(spans)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON file to write (and a .md beside it)")
    ap.add_argument("--sizes_kib", default=",".join(map(str, SIZES_KIB)))
    ap.add_argument("--time_budget_s", type=float, default=0.5)
    ap.add_argument("--clock", choices=("claims", "gate"), default="claims",
                    help="gate: also time each pair under strict with clock='gate' (harness/gate.py), a column beside")
    a = ap.parse_args()
    dev = torch.device("cuda")
    l2 = torch.cuda.get_device_properties(dev).L2_cache_size
    buf = torch.empty(2 * l2, dtype=torch.uint8, device=dev)
    flush = buf.zero_
    rows = []
    clock = runner.Clock(dev, "strict")                 # fixed cost of one strict call
    one = torch.rand(1, device=dev)
    fixed = [clock.call(lambda t: t * 0.75, [one])[0] * 1e3 for _ in range(50)]
    tiny_dev, _, _ = device_spans_us(lambda t: t * 0.75, one, flush)
    jobs, protos = [], ("strict", "kernelbench") + (("strict_gate",) if a.clock == "gate" else ())
    for kib in map(int, a.sizes_kib.split(",")):
        n = kib * 1024 // 4
        ref_mod = {}
        exec(TASK.format(n=n), ref_mod)
        cand_mod = {}
        exec(CAND, cand_mod)
        x = torch.rand(n, device=dev)
        ref_us, ref_span, k1 = device_spans_us(ref_mod["Model"]().forward, x, flush)
        cand_us, cand_span, k2 = device_spans_us(cand_mod["ModelNew"]().forward, x, flush)
        rows.append(dict(kib=kib, n=n, ref_dev_us=ref_us, cand_dev_us=cand_us, true_ratio=ref_us / cand_us,
                         ref_span_us=ref_span, cand_span_us=cand_span, profiled_calls=min(k1, k2)))
        for proto in protos:
            jobs.append((f"{kib}KiB_{proto}", TASK.format(n=n), CAND, dict(protocol=proto.split("_")[0],
                                                                             clock="gate" if "_gate" in proto else
                                                                             "claims")))
    t0 = time.time()
    res = bench.evaluate_many(jobs, device="cuda", time_budget_s=a.time_budget_s, progress=True)
    by = {j[0]: r for j, r in zip(jobs, res)}
    lines = ["| input | ref device us | cand device us | device-time ratio | strict speedup | strict error | "
             "kernelbench speedup | kernelbench error | strict ref_ms | strict cand_ms |" +
             (" gate speedup | gate error | gate cand_ms | gate fixed_ms |" if a.clock == "gate" else ""),
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |" +
             (" ---: | ---: | ---: | ---: |" if a.clock == "gate" else "")]
    for row in rows:
        for proto in protos:
            r = by[f"{row['kib']}KiB_{proto}"]
            row[proto] = dict(status=r["status"], speedup=r["speedup"], ref_ms=r["ref_ms"], cand_ms=r["cand_ms"],
                              clock=r.get("clock"), error=(r["error"] or "")[:200])
            row[proto + "_err_pct"] = (r["speedup"] / row["true_ratio"] - 1) * 100 if r["speedup"] else None
        f = lambda v, p=".3g": "n/a" if v is None else format(v, p)
        size = f"{row['kib']} KiB" if row["kib"] < 1024 else f"{row['kib'] // 1024} MiB"
        s, k = row["strict"], row["kernelbench"]
        lines.append(f"| {size} | {row['ref_dev_us']:.1f} | {row['cand_dev_us']:.1f} | {row['true_ratio']:.3f} | "
                     f"{f(s['speedup'], '.3f')} | {f(row['strict_err_pct'], '+.1f')}% | {f(k['speedup'], '.3f')} | "
                     f"{f(row['kernelbench_err_pct'], '+.1f')}% | {f(s['ref_ms'], '.4f')} | "
                     f"{f(s['cand_ms'], '.4f')} |" +
                     ("" if a.clock != "gate" else
                      f" {f(row['strict_gate']['speedup'], '.3f')} | {f(row['strict_gate_err_pct'], '+.1f')}% | "
                      f"{f(row['strict_gate']['cand_ms'], '.4f')} | "
                      f"{f((row['strict_gate']['clock'] or {}).get('fixed_ms'), '.4f')} |"))
    fixed_line = (f"Fixed cost of one strict call (runner.Clock, 50 calls of a 1-float kernel): median "
                  f"{statistics.median(fixed):.2f} us measured vs {tiny_dev:.2f} us of device time "
                  f"(+{statistics.median(fixed) - tiny_dev:.2f} us; target <= +5 us).")
    ok = [r for r in rows if r["cand_dev_us"] >= 20 and r["strict_err_pct"] is not None]
    worst = max((abs(r["strict_err_pct"]) for r in ok), default=None)
    gate_ok = [r for r in rows if r["cand_dev_us"] >= 20 and r.get("strict_gate_err_pct") is not None]
    worst_gate = max((abs(r["strict_gate_err_pct"]) for r in gate_ok), default=None)
    summary = (f"SUMMARY timing accuracy: kernels >= 20 us: worst strict error "
               f"{'n/a' if worst is None else f'{worst:.1f}%'} over {len(ok)} sizes (target <= 5%); "
               + (f"worst strict clock=gate error {'n/a' if worst_gate is None else f'{worst_gate:.1f}%'} over "
                  f"{len(gate_ok)} sizes; " if a.clock == "gate" else "") +
               f"{fixed_line} bench time {time.time() - t0:.0f} s; {torch.cuda.get_device_name(dev)}")
    text = "\n".join(lines + ["", fixed_line, "", summary])
    print(text)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    json.dump(dict(rows=rows, fixed_cost_us=fixed, tiny_kernel_device_us=tiny_dev, summary=summary,
                   torch=torch.__version__), open(a.out, "w"), indent=1)
    open(os.path.splitext(a.out)[0] + ".md", "w").write(text + "\n")


if __name__ == "__main__":
    main()
