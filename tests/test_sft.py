"""sft.py: loss masking, the locally trained tokenizer, overfitting a few examples, checkpoint round trip."""
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import common
import sft
from training import models

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROWS = [dict(prompt=f"Task {i}: write kernel {i}.\n",
             response=f"## Code Implementation\n```python\nx = {i} * {i}\n```\n")
        for i in range(4)]


@pytest.fixture(scope="module")
def tok():
    return sft.train_tokenizer([r["prompt"] + r["response"] for r in ROWS] * 5, 300)


def test_tokenizer_round_trips_any_text(tok):
    for s in ["class ModelNew:\n    pass\n", "ünïcödé ∑ \t\n", "__global__ void k(float* x) {}"]:
        assert tok.decode(tok(s, add_special_tokens=False)["input_ids"]) == s
    assert tok.eos_token_id != tok.pad_token_id


def test_encode_example_masks_prompt(tok):
    ids, mask = models.encode_example(tok, "PROMPT", "RESPONSE", 512)
    n_p = len(tok("PROMPT", add_special_tokens=False)["input_ids"])
    assert mask == [0] * n_p + [1] * (len(ids) - n_p)
    assert ids[-1] == tok.eos_token_id  # the EOS is a target: the model must learn to stop
    # a long prompt is cut from the left, never the response
    ids2, mask2 = models.encode_example(tok, "P" * 400, "RESPONSE", 20)
    assert len(ids2) == 20 and sum(mask2) == sum(mask)
    with pytest.raises(ValueError):
        models.encode_example(tok, "P", "R" * 400, 5)


def test_sft_loss_counts_only_response_tokens(tok):
    torch.manual_seed(0)
    sft.n_layer, sft.n_embd, sft.n_head, sft.block_size = 1, 32, 2, 256
    model = sft.tiny_model(tok).eval()
    ids, mask = sft.collate([models.encode_example(tok, r["prompt"], r["response"], 256) for r in ROWS[:2]],
                            tok.pad_token_id, "cpu")
    loss = sft.sft_loss(model, ids, mask)
    # by hand: cross-entropy of every position t whose NEXT token is a response token
    logits = model(input_ids=ids).logits
    total, n = 0.0, 0
    for b in range(ids.shape[0]):
        for t in range(ids.shape[1] - 1):
            if mask[b, t + 1]:
                total += F.cross_entropy(logits[b, t][None], ids[b, t + 1][None]).item()
                n += 1
    assert loss.item() == pytest.approx(total / n, rel=1e-5)
    # changing a prompt token changes the context but is never itself a target
    assert n == int(mask[:, 1:].sum())


def test_overfit_and_checkpoint_round_trip(tok, tmp_path):
    torch.manual_seed(0)
    sft.n_layer, sft.n_embd, sft.n_head, sft.block_size = 2, 64, 4, 256
    sft.max_iters, sft.lr, sft.min_lr, sft.warmup_iters, sft.batch_size = 80, 3e-3, 3e-4, 5, 4
    sft.device, sft.log_interval, sft.eval_interval, sft.max_len, sft.val_fraction = "cpu", 1000, 1000, 256, 0.0
    model = sft.tiny_model(tok)
    sft.train(model, tok, ROWS, str(tmp_path))
    ids, mask = sft.collate([models.encode_example(tok, r["prompt"], r["response"], 256) for r in ROWS],
                            tok.pad_token_id, "cpu")
    model.eval()
    loss = sft.sft_loss(model, ids, mask).item()
    assert loss < 0.3, f"4 examples should be memorised, loss {loss}"
    loaded, tok2 = models.load_model(str(tmp_path))
    assert torch.allclose(loaded.eval()(input_ids=ids).logits, model(input_ids=ids).logits, atol=1e-5)
    assert tok2(ROWS[0]["prompt"])["input_ids"] == tok(ROWS[0]["prompt"])["input_ids"]
    assert os.path.exists(tmp_path / "state.pt")


def test_sft_cli_errors_clearly(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "x"}\n')
    p = subprocess.run([sys.executable, "sft.py", f"--data={bad}", "--init_from=tiny", f"--out_dir={tmp_path}"],
                       cwd=ROOT, capture_output=True, text=True)
    assert p.returncode != 0 and "need 'prompt' and 'response'" in p.stderr
    p = subprocess.run([sys.executable, "sft.py", "--no_such_key=1"], cwd=ROOT, capture_output=True, text=True)
    assert p.returncode != 0 and "unknown config key --no_such_key" in p.stderr
    good = tmp_path / "good.jsonl"
    good.write_text('{"prompt": "x", "response": "y"}\n')
    p = subprocess.run([sys.executable, "sft.py", f"--data={good}", "--init_from=/nonexistent/model",
                        f"--out_dir={tmp_path}"], cwd=ROOT, capture_output=True, text=True)
    assert p.returncode != 0 and "model folder '/nonexistent/model' does not exist" in p.stderr


def _setup_small(tok):
    sft.n_layer, sft.n_embd, sft.n_head, sft.block_size = 2, 64, 4, 256
    sft.max_iters, sft.lr, sft.min_lr, sft.warmup_iters, sft.batch_size, sft.grad_accum = 6, 3e-3, 3e-4, 2, 2, 2
    sft.device, sft.log_interval, sft.eval_interval, sft.max_len, sft.val_fraction = "cpu", 1, 1000, 256, 0.0
    sft.save_interval, sft.stop_iter, sft.resume, sft.param_dtype = 0, 0, False, "float32"
    torch.manual_seed(0)
    return sft.tiny_model(tok)


def test_resume_gives_the_same_next_loss(tok, tmp_path):
    """An uninterrupted 6-iteration run against one stopped after iteration 3 (checkpoint) and resumed: the losses
    of iterations 4-6 must be those of the uninterrupted run (same batches, same optimizer state, same weights)."""
    rows = ROWS * 3
    full = sft.train(_setup_small(tok), tok, rows, str(tmp_path / "a"))
    assert [h[0] for h in full] == [1, 2, 3, 4, 5, 6]
    model = _setup_small(tok)
    sft.stop_iter = 3
    part = sft.train(model, tok, rows, str(tmp_path / "b"))
    assert [h[0] for h in part] == [1, 2, 3]
    sft.stop_iter, sft.resume = 0, True
    model, tok2 = models.load_model(str(tmp_path / "b"))  # what `sft.py --resume=True` loads
    resumed = sft.train(model, tok2, rows, str(tmp_path / "b"))
    sft.resume = False
    assert [h[0] for h in resumed] == [1, 2, 3, 4, 5, 6]
    for (i, a, _), (j, b, _) in zip(full, resumed):
        assert a == pytest.approx(b, rel=1e-5, abs=1e-6), (i, a, b)
    # a wrong resume would differ: losses move by far more than the tolerance between iterations
    assert abs(full[3][1] - full[2][1]) > 1e-3


def test_cli_resume_and_val_loss(tmp_path):
    """sft.py as a subprocess: stop at iteration 4 (checkpoint in HF format), resume to 8; held-out loss printed."""
    data = tmp_path / "d.jsonl"
    with open(data, "w") as f:
        for i in range(12):
            f.write(common.json.dumps(dict(prompt=f"Task {i}: kernel {i}\n", response=f"x = {i} * {i}\n")) + "\n")
    args = [sys.executable, "sft.py", "--init_from=tiny", f"--data={data}", f"--out_dir={tmp_path}", "--device=cpu",
            "--vocab_size=300", "--n_layer=1", "--n_embd=32", "--n_head=2", "--max_len=128", "--batch_size=4",
            "--max_iters=8", "--log_interval=2", "--eval_interval=4", "--lr=3e-3", "--warmup_iters=2"]
    p = subprocess.run(args + ["--stop_iter=4"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "stop_iter=4: checkpoint saved" in p.stdout and "| val " in p.stdout
    for f in ("config.json", "model.safetensors", "tokenizer.json", "state.pt"):
        assert (tmp_path / "sft" / f).exists(), f
    p = subprocess.run(args + ["--resume=True"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "resumed at iter 4" in p.stdout and "iter     8" in p.stdout, p.stdout
    hist = common.json.load(open(tmp_path / "sft" / "history.json"))
    assert [h[0] for h in hist] == [2, 4, 6, 8]
