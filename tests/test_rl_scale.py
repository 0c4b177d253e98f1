"""scripts/rl_scale.py --tiny (its tables in miniature, on a CPU): the generation rows of the three rollout engines,
then one GRPO update per setting on the answers; --fit's table under its memory cap; --report prints the tables of
earlier JSON lines. The H200 tables are the same code with the real sizes."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(tmp_path, *args):
    p = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "rl_scale.py"), "--tiny", *args],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    return p


def test_rl_scale_tiny_grid(tmp_path):
    out = tmp_path / "grid.jsonl"
    p = _run(tmp_path, f"--out={out}")
    assert p.returncode == 0, p.stderr[-3000:]
    rows = [json.loads(line) for line in open(out)]
    gens = [r for r in rows if r["kind"] == "gen"]
    assert [r["engine"] for r in gens] == ["generate", "static", "continuous"], gens
    for r in gens:
        assert r["answers"] == 4 and r["gen_tokens_per_s"] > 0 and r["dtype"] == "float32", r  # CPU: no bf16 copy
    # the old path runs every answer to old_tokens; the new engines stop each answer at its drawn length (8..32)
    assert gens[0]["tokens_mean"] == 32 and gens[0]["warmup_s"] is None
    assert gens[1]["gen_tokens"] == gens[2]["gen_tokens"] and 8 <= gens[1]["tokens_mean"] < 32, gens
    trains = [r for r in rows if r["kind"] == "train"]
    assert [(r["micro_batch_size"], r["gradient_checkpointing"]) for r in trains] == [(1, True), (4, True)], trains
    for r in trains:
        assert r["status"] == "ok" and r["train_s"] > 0 and r["gen_engine"] in ("static", "continuous"), r
        assert r["step_s_new"] > r["train_s"] and r["step_s_old"] > r["train_s"], r
    assert "| tiny | continuous | float32 | 4 |" in p.stdout and "| tiny | 4 | on |" in p.stdout, p.stdout[-2000:]
    # the tables again from the JSON lines
    again = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "rl_scale.py"), f"--report={out}"],
                           capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert again.returncode == 0 and "| tiny | static | float32 | 4 |" in again.stdout, again.stderr[-2000:]


def test_rl_scale_random_rollouts_train_without_generating(tmp_path):
    """--rollouts=random (finishing a grid cut by a time limit): the same update on random completions of the drawn
    lengths, no generation figures (None, "n/a" in the table) rather than made-up ones."""
    out = tmp_path / "grid.jsonl"
    p = _run(tmp_path, "--rollouts=random", "--gradient_checkpointing=off", f"--out={out}")
    assert p.returncode == 0, p.stderr[-3000:]
    rows = [json.loads(line) for line in open(out)]
    assert [(r["kind"], r["micro_batch_size"], r["gradient_checkpointing"]) for r in rows] == \
        [("train", 1, False), ("train", 4, False)], rows
    for r in rows:
        assert r["status"] == "ok" and r["train_s"] > 0 and r["gen_tokens_per_s"] is None, r
        assert "step_s_new" not in r and "step_s_old" not in r, r
    assert "| tiny | 4 | off | n/a | n/a |" in p.stdout, p.stdout[-2000:]


def test_rl_scale_fit_table(tmp_path):
    out = tmp_path / "fit.jsonl"
    p = _run(tmp_path, "--fit", f"--out={out}")
    assert p.returncode == 0, p.stderr[-3000:]
    rows = [json.loads(line) for line in open(out)]
    assert [(r["kind"], r["model"], r["status"], r["fit_length"]) for r in rows] == [("fit", "tiny", "fits", 32)]
    assert "| tiny | 1 | on | off | fits |" in p.stdout, p.stdout[-2000:]


@pytest.mark.gpu
def test_rl_scale_gpu_small(tmp_path):
    """The real-size path on a GPU, small: a 0.5B-shaped policy, 4 answers of up to 64 tokens; the new engines sample
    from a bf16 copy and every row has its peak memory."""
    out = tmp_path / "gpu.jsonl"
    p = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "rl_scale.py"), "--models=0.5b",
                        "--num_prompts=2", "--num_generations=2", "--max_completion_length=64",
                        "--min_completion_length=16", "--old_tokens=16", f"--out={out}"],
                       capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    rows = [json.loads(line) for line in open(out)]
    gens = {r["engine"]: r for r in rows if r["kind"] == "gen"}
    assert gens["generate"]["dtype"] == "float32" and gens["static"]["dtype"] == gens["continuous"]["dtype"] == \
        "bfloat16", gens
    assert all(r["gen_peak_gib"] > 0 for r in gens.values())
    train = [r for r in rows if r["kind"] == "train"]
    assert train and all(r["status"] == "ok" and r["step_peak_gib"] > 0 for r in train), train
