"""scripts/rl_scale.py --tiny (its grid in miniature, on a CPU): every setup of the grid runs one GRPO
update after full-length generation and writes its row; the H200 grid is the same code with the real sizes."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_rl_scale_tiny_grid(tmp_path):
    out = tmp_path / "grid.jsonl"
    p = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "rl_scale.py"), "--tiny", f"--out={out}"],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    rows = [json.loads(line) for line in open(out)]
    assert [(r["micro_batch_size"], r["gradient_checkpointing"]) for r in rows] == \
        [(1, False), (4, False), (1, True), (4, True)], rows
    for r in rows:
        assert r["status"] == "ok" and r["max_completion_length"] == 32 and r["train_s"] > 0, r
        assert r["gen_tokens_per_s"] > 0 and r["num_prompts"] * r["num_generations"] == 4, r
    assert "generating 2 x 2 x 32 tokens" in p.stdout and "| tiny | 4 | on |" in p.stdout, p.stdout[-2000:]


def test_rl_scale_random_rollouts_train_without_generating(tmp_path):
    """--rollouts=random (finishing a grid cut by a time limit): the same update on random completions of full length,
    no generation figures (None, "n/a" in the table) rather than made-up ones."""
    out = tmp_path / "grid.jsonl"
    p = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "rl_scale.py"), "--tiny", "--rollouts=random",
                        "--gradient_checkpointing=on", f"--out={out}"], capture_output=True, text=True, timeout=300,
                       cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    rows = [json.loads(line) for line in open(out)]
    assert [(r["micro_batch_size"], r["gradient_checkpointing"]) for r in rows] == [(1, True), (4, True)], rows
    for r in rows:
        assert r["status"] == "ok" and r["train_s"] > 0 and r["rollouts"] == "random", r
        assert r["gen_s"] is None and r["gen_tokens_per_s"] is None, r
    assert "generating" not in p.stdout and "| tiny | 4 | on | n/a | n/a |" in p.stdout, p.stdout[-2000:]
