"""Training curves of several rl.py runs in one PNG, and their start/end means, for ablations:

    python scripts/compare_runs.py OUT.png LABEL=out/a/rl/log.jsonl LABEL=out/b/rl/log.jsonl

Prints per run: steps, and the mean over the first 3 and the last 4 steps of frac_of_best (speedup / the task's best
seed kernel, failures as 0), speedup_all (x, failures as 0), ok (fraction of correct samples) and format_error.
"""
import json
import sys

KEYS = ("frac_of_best", "speedup_all", "ok", "format_error")

if __name__ == "__main__":
    if len(sys.argv) < 3 or not all("=" in a for a in sys.argv[2:]):
        sys.exit(__doc__.strip().splitlines()[2].strip())
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(1, len(KEYS), figsize=(4.5 * len(KEYS), 3.6))
    for arg in sys.argv[2:]:
        label, path = arg.split("=", 1)
        rows = [json.loads(line) for line in open(path) if line.strip()]
        mean = lambda rs, k: sum(r[k] for r in rs) / max(len(rs), 1)
        print(f"{label}: {len(rows)} steps | " + " | ".join(
            f"{k} {mean(rows[:3], k):.2f} -> {mean(rows[-4:], k):.2f}" for k in KEYS))
        for a, k in zip(ax, KEYS):
            a.plot([r["step"] for r in rows], [r[k] for r in rows], label=label)
            a.set_xlabel("step"); a.set_ylabel(k)
    ax[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(sys.argv[1], dpi=110)
