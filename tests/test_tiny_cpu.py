"""The walking skeleton end to end without a GPU: prepare -> sft -> rl -> evaluate on the project-written CPU tasks
(config/tiny_cpu.py), as real subprocesses, and RL must have learned from the measured speedups. prepare + sft are
the session fixture tiny_cpu_prepared (conftest.py, shared with test_sft_selftrain and test_rl_runs); rl.py
--preset=tiny_cpu then finds them done and runs rl and evaluate."""
import json
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MARGIN = 0.3  # x of mean speedup per answer; seeds 1, 2, 3 of `python rl.py --preset=demo --seed=N` (README) gained
              # 0.71, 0.53 and 0.50 (standard errors 0.06-0.08 on each side)


def test_tiny_cpu_pipeline_learns(tiny_cpu_prepared, tmp_path):
    out = shutil.copytree(tiny_cpu_prepared, tmp_path / "run")
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
    # a sample whose kernel its step measured says where the seconds went (why an H200 demo step took 67 s)
    samples = [json.loads(line) for line in open(out / "rl" / "samples.jsonl")]
    timed = [s for s in samples if "eval_s" in s]
    new = sum(json.loads(line)["new_kernels"] for line in open(out / "rl" / "log.jsonl"))  # often 0 on CPU
    assert len(timed) >= min(new, 1) and all(isinstance(s["phase_s"], dict) and "compile_s" in s for s in timed)
    # learning: the kernels sampled at the end are faster (failures count as 0) than at the start, measured as a
    # fraction of each task's best seed kernel (timing noise on a shared CPU moves single steps by ~0.1: compare
    # means of several steps)
    log = [json.loads(line) for line in open(out / "rl" / "log.jsonl")]
    mean = lambda rows, k: sum(h[k] for h in rows) / len(rows)
    curve = [round(h["frac_of_best"], 2) for h in log]
    assert mean(log[-4:], "frac_of_best") >= mean(log[:3], "frac_of_best") + 0.1, curve
    assert mean(log[-4:], "speedup_all") > mean(log[:3], "speedup_all"), [h["speedup_all"] for h in log]
    # the demo's proof: the final evaluation samples 16 answers per task from the model before RL
    # (the SFT model) and after, on the same prompts, each distinct kernel timed once; the mean speedup per answer
    # (failures as 0) is higher after RL by a margin (3 seeds: see README "what you should see")
    ps = json.load(open(out / "eval" / "summary.json"))["per_sample"]
    before, after = ps["before_rl"], ps["after_rl"]
    assert before["samples"] == after["samples"] == 48, ps
    # The count of correct answers may dip: in one CI run the mean rose 0.66x -> 2.31x while rmsnorm went from 12 to
    # 1 correct of 16 (33 -> 32 in all), its slow kernels outweighed in the batch-normalised rewards by swish and
    # new_gelu at ~3.6x (rl.py's reward_norm). A collapse of correctness still fails here.
    assert after["mean"] >= before["mean"] + MARGIN and after["correct"] >= 0.75 * before["correct"], ps
    assert "### per sample" in (out / "eval" / "summary.md").read_text()
    # each stage's wall time at the end; prepare and sft ran in the fixture, not here
    assert re.search(r"wall time: rl \d+ s, evaluate \d+ s; this command \d+ s", p.stdout), p.stdout[-500:]
    # transformers' per-checkpoint progress bars are off (our log lines say what was saved)
    assert "Writing model shards" not in p.stdout + p.stderr and "Loading weights" not in p.stdout + p.stderr
