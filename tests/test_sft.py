"""sft.py: loss masking, the locally trained tokenizer, overfitting a few examples, checkpoint round trip."""
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import common
import sft

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROWS = [dict(prompt=f"Task {i}: write kernel {i}.\n", response=f"## Code Implementation\n```python\nx = {i} * {i}\n```\n")
        for i in range(4)]


@pytest.fixture(scope="module")
def tok():
    return sft.train_tokenizer([r["prompt"] + r["response"] for r in ROWS] * 5, 300)


def test_tokenizer_round_trips_any_text(tok):
    for s in ["class ModelNew:\n    pass\n", "ünïcödé ∑ \t\n", "__global__ void k(float* x) {}"]:
        assert tok.decode(tok(s, add_special_tokens=False)["input_ids"]) == s
    assert tok.eos_token_id != tok.pad_token_id


def test_encode_example_masks_prompt(tok):
    ids, mask = common.encode_example(tok, "PROMPT", "RESPONSE", 512)
    n_p = len(tok("PROMPT", add_special_tokens=False)["input_ids"])
    assert mask == [0] * n_p + [1] * (len(ids) - n_p)
    assert ids[-1] == tok.eos_token_id  # the EOS is a target: the model must learn to stop
    # a long prompt is cut from the left, never the response
    ids2, mask2 = common.encode_example(tok, "P" * 400, "RESPONSE", 20)
    assert len(ids2) == 20 and sum(mask2) == sum(mask)
    with pytest.raises(ValueError):
        common.encode_example(tok, "P", "R" * 400, 5)


def test_sft_loss_counts_only_response_tokens(tok):
    torch.manual_seed(0)
    sft.n_layer, sft.n_embd, sft.n_head, sft.block_size = 1, 32, 2, 256
    model = sft.tiny_model(tok).eval()
    ids, mask = sft.collate([common.encode_example(tok, r["prompt"], r["response"], 256) for r in ROWS[:2]],
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
    ids, mask = sft.collate([common.encode_example(tok, r["prompt"], r["response"], 256) for r in ROWS],
                            tok.pad_token_id, "cpu")
    model.eval()
    loss = sft.sft_loss(model, ids, mask).item()
    assert loss < 0.3, f"4 examples should be memorised, loss {loss}"
    loaded, tok2 = common.load_model(str(tmp_path))
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
    assert p.returncode != 0 and "cannot load model '/nonexistent/model'" in p.stderr
