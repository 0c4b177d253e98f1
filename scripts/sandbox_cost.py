"""What each sandbox layer (harness/sandbox.py) costs at start-up, on this machine:

    python scripts/sandbox_cost.py [--n 30]

- bubblewrap: the median time to start /bin/true under sandbox.bwrap_command, less the time to start it plainly
  (paid once per fork server, which serves every runner of a build root);
- Landlock: the median of the `landlock` phase (ms) of `--n` runners, each a bench.evaluate of a small CPU candidate
  (paid once per forked runner, before any candidate code).
Prints one line per layer; a layer this machine lacks is named as missing (see the README to install it).
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import bench  # noqa: E402
from harness import record, sandbox  # noqa: E402


def median_ms(cmd, n):
    times = []
    for _ in range(n):
        start = time.perf_counter()
        subprocess.run(cmd, check=True)
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=30, help="starts timed per layer")
    n = ap.parse_args().n
    with tempfile.TemporaryDirectory() as tmp:
        if sandbox.bwrap_path() is None:
            print("bwrap: missing (not on PATH, CUDAL1_BWRAP unset)")
        else:
            plain = median_ms(["/bin/true"], n)
            wrapped = median_ms(sandbox.bwrap_command(["/bin/true"], [os.path.join(tmp, "w")]), n)
            print(f"bwrap: +{wrapped - plain:.2f} ms per fork server start ({wrapped:.2f} ms against {plain:.2f} ms "
                  f"for /bin/true alone; median of {n})")
        if sandbox.landlock_abi() < 1:
            print("landlock: missing (no kernel support, or landlockpy not installed)")
            return
        task = open(os.path.join(ROOT, "tests", "fixtures", "cpu_task_scale.py")).read()
        cand = open(os.path.join(ROOT, "tests", "fixtures", "cand_scale_correct.py")).read()
        phases = []
        for _ in range(n):
            r = bench.evaluate(task, cand, device="cpu", num_correct_trials=1, time_budget_s=0.05,
                               build_root=os.path.join(tmp, "build"))
            assert r["status"] == "ok", record.summary(r)
            phases.append(r["phase_s"]["landlock"] * 1e3)
        print(f"landlock: {statistics.median(phases):.2f} ms per runner (median of {n}, "
              f"{min(phases):.2f}-{max(phases):.2f}; sandbox {r['sandbox']})")


if __name__ == "__main__":
    main()
