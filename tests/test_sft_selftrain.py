"""Stage 2 (sft.py --self_train) on the CPU tiny run: prepare -> sft (the session fixture tiny_cpu_prepared,
conftest.py) -> 2 self-training rounds, as subprocesses.
The round log must exist with success rates in [0, 1] that match the per-sample verdicts, and every kept sample
must really pass bench.py (re-evaluated here, not taken from the log)."""
import json
import os
import shutil
import subprocess
import sys

import bench
import common
import prompting
from harness import record

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(args, env):
    p = subprocess.run([sys.executable] + args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500)
    print(p.stdout[-4000:], p.stderr[-2000:])
    assert p.returncode == 0, p.stderr[-3000:]
    return p


def test_self_train_rounds(tiny_cpu_prepared, tmp_path):
    out = shutil.copytree(tiny_cpu_prepared, tmp_path / "run")
    env = dict(os.environ, CUDAL1_BUILD_ROOT=str(tmp_path / "build"), PYTHONUNBUFFERED="1")
    p = run(["sft.py", "--preset=tiny_cpu_self_train", f"--out_dir={out}"], env)
    st = out / "self_train"
    log = common.read_jsonl(st / "log.jsonl")
    assert [h["round"] for h in log] == [0, 1, 2]  # 2 fine-tuning rounds + the measuring round
    assert [h["trained"] for h in log][2] is False
    for h in log:
        assert 0.0 <= h["success_rate"] <= 1.0 and h["samples"] == 9
        samples = common.read_jsonl(st / f"round{h['round']}" / "samples.jsonl")
        assert h["success_rate"] == sum(s["status"] == "ok" for s in samples) / len(samples)
    assert "success rate per round: " in p.stdout
    kept = common.read_jsonl(st / "kept.jsonl")
    assert len({k["key"] for k in kept}) == len(kept)  # deduplicated
    assert sum(h["kept_new"] for h in log) == len(kept)
    assert len(kept) >= 1, "the SFT model should write at least one correct kernel in 27 samples"
    tasks = {t["name"]: t for t in common.read_jsonl(out / "tasks.jsonl")}
    for k in kept[:3]:  # judged ok by bench, again, here
        assert prompting.extract_code(k["response"])[0] == k["code"]
        r = bench.evaluate(tasks[k["task"]]["src"], k["code"], device="cpu", num_correct_trials=2, time_budget_s=0.1)
        assert r["status"] == "ok", record.summary(r)
    for r in (0, 1):
        assert (st / f"round{r}" / "model" / "config.json").exists()
    assert json.load(open(st / "summary.json"))["success_rate"] == [h["success_rate"] for h in log]
    # resumable per round: a rerun finds every round done and samples nothing
    p = run(["sft.py", "--preset=tiny_cpu_self_train", f"--out_dir={out}"], env)
    assert "round 0 |" not in p.stdout and len(common.read_jsonl(st / "log.jsonl")) == 3
