"""RL throughput from rl.py's log: python scripts/steps_per_hour.py [--first=N] out/tiny/rl/log.jsonl [more logs...]

Prints, per log: world size, steps, mean seconds per step, and steps per hour, over all steps and without the first
(which pays for cold caches and CUDA start-up). --first=N: only steps 0..N-1 of each
log, to compare runs of different lengths over the same steps. Seconds per step = t_step of each line
(generate + evaluate + train + logging; checkpoints excluded); logs without t_step use t_gen + t_eval + t_train.
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
        line = f"{path}: world_size {rows[0].get('world_size', 1)}, {len(rows)} steps, {s_all:.1f} s/step, {h_all:.0f} steps/hour"
        if len(rows) > 1:
            s_rest, h_rest = steps_per_hour(rows[1:])
            line += f"; without step 0: {s_rest:.1f} s/step, {h_rest:.0f} steps/hour"
        print(line)
