"""sft.py on a CUDA GPU: bf16 autocast with gradient checkpointing learns and saves a loadable checkpoint;
scripts/sft_speed.py reports peak memory on CUDA."""
import json
import os
import subprocess
import sys

import pytest
import torch

import sft
from training import models

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROWS = [dict(prompt=f"Task {i}: write kernel {i}.\n",
             response=f"## Code Implementation\n```python\nx = {i} * {i}\n```\n")
        for i in range(4)]


@pytest.mark.gpu
def test_bf16_checkpointed_training_on_cuda(tmp_path):
    tok = sft.train_tokenizer([r["prompt"] + r["response"] for r in ROWS] * 5, 300)
    torch.manual_seed(0)
    sft.n_layer, sft.n_embd, sft.n_head, sft.block_size = 2, 64, 4, 256
    sft.max_iters, sft.lr, sft.min_lr, sft.warmup_iters, sft.batch_size, sft.grad_accum = 80, 3e-3, 3e-4, 5, 4, 1
    sft.device, sft.log_interval, sft.eval_interval, sft.max_len, sft.val_fraction = "cuda", 10, 1000, 256, 0.0
    sft.dtype, sft.gradient_checkpointing, sft.resume, sft.stop_iter, sft.save_interval = "bfloat16", True, False, 0, 0
    model = sft.tiny_model(tok)
    hist = sft.train(model, tok, ROWS, str(tmp_path))
    assert hist[-1][1] < 0.5 * hist[0][1], hist
    loaded, _ = models.load_model(str(tmp_path), device="cuda")
    ids, mask = sft.collate([models.encode_example(tok, r["prompt"], r["response"], 256) for r in ROWS],
                            tok.pad_token_id, "cuda")
    model.eval()
    with torch.no_grad():
        assert torch.allclose(loaded.eval()(input_ids=ids).logits, model(input_ids=ids).logits, atol=1e-4)
    sft.gradient_checkpointing, sft.device = False, "cpu"


@pytest.mark.gpu
def test_sft_speed_reports_cuda_memory(tmp_path):
    out = tmp_path / "s.json"
    p = subprocess.run([sys.executable, "scripts/sft_speed.py", "--models=tiny", "--device=cuda", "--iters=3",
                        "--seq_len=256", f"--out={out}"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    rows = json.load(open(out))
    assert len(rows) == 2 and all(r["status"] == "ok" and r["peak_mem_gib"] > 0 for r in rows)
