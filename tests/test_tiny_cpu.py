"""The walking skeleton end to end without a GPU: prepare -> sft -> rl -> evaluate on the project-written CPU tasks
(config/tiny_cpu.py), as real subprocesses, and RL must have learned from the measured speedups."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_tiny_cpu_pipeline_learns(tmp_path):
    out = tmp_path / "run"
    env = dict(os.environ, CUDAL1_BUILD_ROOT=str(tmp_path / "build"), PYTHONUNBUFFERED="1")
    p = subprocess.run([sys.executable, "rl.py", "--preset=tiny_cpu", f"--out_dir={out}"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=1500)
    print(p.stdout[-6000:], p.stderr[-3000:])
    assert p.returncode == 0, p.stderr[-3000:]
    # every stage left its output
    for f in ("tasks.jsonl", "seed.jsonl", "db.json", "sft.jsonl", "sft/config.json", "rl/log.jsonl",
              "rl/samples.jsonl", "rl/curves.png", "rl/ckpt/state.pt", "eval/summary.md", "eval/results.jsonl"):
        assert (out / f).exists(), f
    # the seed kernels were measured: every one labelled correct passed, every wrong one failed
    seeds = [json.loads(line) for line in open(out / "seed.jsonl")]
    assert all((s["expect"] == "correct") == s["correct"] for s in seeds), \
        [(s["task"], s["variant"], s["result"]["status"]) for s in seeds if (s["expect"] == "correct") != s["correct"]]
    # learning: the sampled kernels at the end are faster (failures count as 0) than at step 0
    log = [json.loads(line) for line in open(out / "rl" / "log.jsonl")]
    first, last = log[0], log[-1]
    late = sum(h["frac_of_best"] for h in log[-2:]) / 2
    assert late >= first["frac_of_best"] + 0.15, (first["frac_of_best"], [h["frac_of_best"] for h in log])
    assert last["speedup_all"] > first["speedup_all"], [h["speedup_all"] for h in log]
