"""scripts/sft_speed.py runs on CPU with a tiny Qwen2 config and writes its JSON (the figures come from the GPU)."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_sft_speed_runs_on_cpu(tmp_path):
    out = tmp_path / "s.json"
    p = subprocess.run([sys.executable, "scripts/sft_speed.py", "--models=tiny", "--device=cpu", "--iters=2",
                        "--warmup=1", "--seq_len=32", f"--out={out}"], cwd=ROOT, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    rows = json.load(open(out))
    assert [(r["model"], r["gradient_checkpointing"], r["status"]) for r in rows] == [("tiny", False, "ok"),
                                                                                  ("tiny", True, "ok")]
    assert all(r["tokens_per_s"] > 0 and r["params_m"] > 0 for r in rows)
    assert p.stdout.count("tok/s") == 2
    p = subprocess.run([sys.executable, "scripts/sft_speed.py", "--models=70b"], cwd=ROOT, capture_output=True,
                       text=True)
    assert p.returncode == 1 and "unknown model '70b'" in p.stderr
