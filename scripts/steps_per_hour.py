"""RL throughput from rl.py's log: python scripts/steps_per_hour.py [--first=N] out/tiny/rl/log.jsonl [more logs...]

Prints, per log: world size, steps, mean seconds per step, and steps per hour, over all steps and without the first
(which pays for cold caches and CUDA start-up). --first=N: only steps 0..N-1 of each
log, to compare runs of different lengths over the same steps. Seconds per step = t_step of each line
(generate + evaluate + train + logging; checkpoints excluded); logs without t_step use t_gen + t_eval + t_train.
When the log has new_kernels, a second line splits the time: mean gen / eval / train seconds per step and evaluation
seconds per new kernel. Two runs' steps per hour differ mostly by how many distinct kernels their policies drew (a
kernel met before is a cache hit, ~0 s), so compare eval s per new kernel before crediting an option with a speed-up
(an async_rollouts ablation on the H200: 183 vs 299 steps/hour from 19 vs 11 new kernels, 11.0 vs 11.6 s each).
"""
import json
import sys


def steps_per_hour(rows):
    """(mean seconds per step, steps per hour) of log rows; raises ValueError for an empty log."""
    if not rows:
        raise ValueError("no steps in the log")
    secs = [r["t_step"] if "t_step" in r else r["t_gen"] + r["t_eval"] + r["t_train"] for r in rows]
    mean = sum(secs) / len(secs)
    return mean, 3600.0 / mean


def breakdown(rows):
    """Mean t_gen, t_eval, t_train (s per step), new kernels in all, and t_eval summed over new_kernels summed (s per
    new kernel; None when none was new)."""
    n = len(rows)
    new = sum(r["new_kernels"] for r in rows)
    ev = sum(r.get("t_eval", 0.0) for r in rows)
    return (sum(r.get("t_gen", 0.0) for r in rows) / n, ev / n, sum(r.get("t_train", 0.0) for r in rows) / n, new,
            ev / new if new else None)


if __name__ == "__main__":
    args = sys.argv[1:]
    first = int(args.pop(0).split("=", 1)[1]) if args and args[0].startswith("--first=") else None
    if not args:
        sys.exit(__doc__.strip().splitlines()[0])
    for path in args:
        rows = [json.loads(line) for line in open(path) if line.strip()][:first]
        if not rows:
            sys.exit(f"error: {path} has no steps")
        s_all, h_all = steps_per_hour(rows)
        line = (f"{path}: world_size {rows[0].get('world_size', 1)}, {len(rows)} steps, {s_all:.1f} s/step, "
                f"{h_all:.0f} steps/hour")
        if len(rows) > 1:
            s_rest, h_rest = steps_per_hour(rows[1:])
            line += f"; without step 0: {s_rest:.1f} s/step, {h_rest:.0f} steps/hour"
        print(line)
        if all("new_kernels" in r for r in rows):
            g, e, t, new, per = breakdown(rows)
            print(f"  per step: gen {g:.1f} s, eval {e:.1f} s, train {t:.1f} s; {new} new kernels, "
                  + (f"{per:.1f} s of evaluation each" if per is not None else "none evaluated"))
