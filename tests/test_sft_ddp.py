"""sft.py under torchrun with 2 CPU ranks (gloo): DDP trains one model (the ranks end with the same weights,
although each drew its own batches) and saves a checkpoint that loads."""
import os
import re
import subprocess
import sys

import common
from training import models

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_sft_ddp_two_ranks(tmp_path):
    data = tmp_path / "d.jsonl"
    with open(data, "w") as f:
        for i in range(12):
            f.write(common.json.dumps(dict(prompt=f"Task {i}: kernel {i}\n", response=f"y = x * {i}\n")) + "\n")
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")  # every rank's lines reach the pipe
    p = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
                        "--standalone",  # a free port
                        "sft.py", "--init_from=tiny", f"--data={data}", f"--out_dir={tmp_path}", "--device=cpu",
                        "--vocab_size=300", "--n_layer=1", "--n_embd=32", "--n_head=2", "--max_len=128",
                        "--batch_size=2", "--grad_accum=2", "--max_iters=4", "--log_interval=1", "--lr=3e-3"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-3000:]
    assert "2 rank(s), 8 examples per step" in out
    sums = re.findall(r"rank (\d) param checksum (-?\d+\.\d{8})", out)  # two ranks share one pipe
    assert sorted(r for r, _ in sums) == ["0", "1"], out[-2000:]
    assert sums[0][1] == sums[1][1], sums  # gradients were all-reduced: one model
    model, tok = models.load_model(str(tmp_path / "sft"))
    assert abs(sum(p.detach().double().sum().item() for p in model.parameters()) - float(sums[0][1])) < 1e-6
    assert out.count("iter     4") == 1  # only rank 0 logs
