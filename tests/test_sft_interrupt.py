"""sft.py's bookkeeping: the logged step loss is the token mean over all micro-batches of the step, and a
Ctrl-C or SIGTERM at any point of an iteration leaves a checkpoint from which --resume reproduces the uninterrupted
run exactly (losses and final weights), without ever applying a step twice."""
import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F

import common
import sft

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# responses of very different lengths, so that a mean of micro-batch means differs from the token mean
ROWS = [dict(prompt=f"Task {i}: write kernel {i}.\n",
             response=f"## Code\n```python\nx = {i}\n" + "y = x * x\n" * (1 + 6 * i) + "```\n") for i in range(4)]


def test_logged_loss_is_the_token_mean_of_the_whole_step(tmp_path, monkeypatch):
    tok = sft.train_tokenizer([r["prompt"] + r["response"] for r in ROWS] * 5, 300)
    sft.n_layer, sft.n_embd, sft.n_head, sft.block_size = 1, 32, 2, 512
    sft.max_iters, sft.lr, sft.min_lr, sft.warmup_iters, sft.batch_size, sft.grad_accum = 1, 1e-3, 1e-4, 1, 1, 2
    sft.device, sft.log_interval, sft.eval_interval, sft.max_len, sft.val_fraction = "cpu", 1, 1000, 512, 0.0
    sft.save_interval, sft.stop_iter, sft.resume, sft.param_dtype = 0, 0, False, "float32"
    torch.manual_seed(0)
    model = sft.tiny_model(tok)
    start = sft.tiny_model(tok)
    start.load_state_dict(model.state_dict())
    seen = []
    collate = sft.collate
    monkeypatch.setattr(sft, "collate", lambda ex, *a: seen.append(collate(ex, *a)) or seen[-1])
    hist = sft.train(model, tok, ROWS, str(tmp_path))
    assert len(seen) == 2  # the two micro-batches of iteration 1 (the loss is logged before the optimizer step)
    # by hand: the cross-entropy of every response token of both micro-batches, one mean over all of them
    nll, n, means = 0.0, 0, []
    for ids, mask in seen:
        logits = start(input_ids=ids).logits[:, :-1].float()
        tgt, m = ids[:, 1:], mask[:, 1:].float()
        per = F.cross_entropy(logits.reshape(-1, logits.size(-1)), tgt.reshape(-1), reduction="none") * m.reshape(-1)
        nll, n = nll + per.sum().item(), n + int(m.sum())
        means.append(per.sum().item() / m.sum().item())
    assert seen[0][1].sum() != seen[1][1].sum(), "the test needs micro-batches of different token counts"
    assert hist[0][1] == pytest.approx(nll / n, rel=1e-5)
    assert abs(nll / n - sum(means) / 2) > 1e-3  # what a mean of micro-batch means would have logged


DRIVER = textwrap.dedent(r'''
    # Runs sft.train uninterrupted, then once per point of an iteration with a real signal (SIGINT, SIGTERM) sent to
    # itself at that point of iteration 4 of 6, then resumes from the checkpoint; prints one JSON line per point.
    import builtins, json, os, signal, sys, torch, common, sft
    from training import models
    out = sys.argv[1]
    rows = [dict(prompt=f"Task {i}: kernel {i}\n", response=f"x = {i}\n" + "y = x * x\n" * (1 + 3 * i))
            for i in range(6)]
    tok = sft.train_tokenizer([r["prompt"] + r["response"] for r in rows] * 5, 300)

    def setup():
        sft.n_layer, sft.n_embd, sft.n_head, sft.block_size = 1, 32, 2, 256
        sft.max_iters, sft.lr, sft.min_lr, sft.warmup_iters, sft.batch_size, sft.grad_accum = 6, 3e-3, 3e-4, 2, 2, 2
        sft.device, sft.log_interval, sft.eval_interval, sft.max_len, sft.val_fraction = "cpu", 1, 1000, 256, 0.0
        sft.save_interval, sft.stop_iter, sft.resume, sft.param_dtype = 2, 0, False, "float32"
        torch.manual_seed(0)
        return sft.tiny_model(tok)

    K = 3  # optimizer steps done when the signal comes: the point lies in the 4th iteration (or its end)
    state = dict(steps=0, calls=0, fired=False, point=None, sig=None)

    def maybe_fire(point, after_step=False):
        # the iteration a point belongs to: the one whose optimizer step is next, or (after_step) has just run
        if state["point"] == point and not state["fired"] and state["steps"] - after_step == K:
            state["calls"] += 1
            if state["calls"] == state["nth"]:
                state["fired"] = True
                os.kill(os.getpid(), state["sig"])

    def wrap(owner, name, point, after=False, after_step=False):
        orig = getattr(owner, name)
        def f(*a, **kw):
            if not after:
                maybe_fire(point, after_step)
            r = orig(*a, **kw)
            if after:
                maybe_fire(point, after_step)
            return r
        setattr(owner, name, f)

    orig_step = torch.optim.AdamW.step
    def step(self, *a, **kw):
        maybe_fire("before opt.step")
        r = orig_step(self, *a, **kw)
        state["steps"] += 1
        maybe_fire("after opt.step", True)
        return r
    torch.optim.AdamW.step = step
    wrap(sft, "lr_at", "iteration start")
    wrap(sft, "collate", "sampling")
    wrap(sft, "sft_loss", "forward")
    wrap(torch.Tensor, "backward", "backward", after=True)
    wrap(torch.nn.utils, "clip_grad_norm_", "grad clip", after=True)
    wrap(torch.optim.Optimizer, "zero_grad", "after zero_grad", after=True, after_step=True)  # before it += 1
    def log_print(*a, **kw):
        if a and str(a[0]).startswith("iter"):
            maybe_fire("log line", True)
        builtins.print(*a, **kw)
    sft.print = log_print
    wrap(common, "write_json_atomic", "saving", after_step=True)  # the save_interval checkpoint after iteration 4

    def params(m):
        return [p.detach().clone() for p in m.parameters()]

    full = sft.train(setup(), tok, rows, os.path.join(out, "full"))
    full_w = params(models.load_model(os.path.join(out, "full"))[0])
    points = [("iteration start", 2),  # lr_at: 1st call = iteration 3's log line, 2nd = iteration 4's start
              ("sampling", 1), ("sampling", 2), ("forward", 1), ("forward", 2),
              ("backward", 1), ("backward", 2), ("grad clip", 1), ("before opt.step", 1), ("after opt.step", 1),
              ("after zero_grad", 1), ("log line", 1), ("saving", 1)]
    for n, (point, nth) in enumerate(points):
        d = os.path.join(out, f"p{n}")
        sig = signal.SIGINT if n % 2 == 0 else signal.SIGTERM
        state.update(steps=0, calls=0, fired=False, point=point, nth=nth, sig=sig)
        code = None
        try:
            sft.train(setup(), tok, rows, d)
        except SystemExit as e:
            code = e.code
        except KeyboardInterrupt:
            code = "KeyboardInterrupt"
        fired, at = state["fired"], torch.load(os.path.join(d, "state.pt"), weights_only=False)["iter"] \
            if os.path.exists(os.path.join(d, "state.pt")) else None
        state.update(point=None)
        sft.resume = True
        model, tok2 = models.load_model(d)
        hist = sft.train(model, tok2, rows, d)
        sft.resume = False
        w = params(models.load_model(d)[0])
        print(json.dumps(dict(point=point, nth=nth, sig=int(sig), fired=fired, code=code, saved_iter=at,
                              iters=[h[0] for h in hist], full_iters=[h[0] for h in full],
                              loss_diff=max(abs(a[1] - b[1]) for a, b in zip(hist, full)),
                              weight_diff=max((a - b).abs().max().item() for a, b in zip(w, full_w)))), flush=True)
''')


def test_interrupt_at_every_point_resumes_exactly(tmp_path):
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    p = subprocess.run([sys.executable, str(script), str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                       timeout=900, env=dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1"))
    rows = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    assert p.returncode == 0 and len(rows) == 13, (p.returncode, p.stdout[-3000:], p.stderr[-3000:])
    bad = [r for r in rows if not (r["fired"] and r["code"] == 130 and r["iters"] == r["full_iters"]
                                   and r["loss_diff"] < 1e-6 and r["weight_diff"] < 1e-6)]
    assert not bad, bad
    # the checkpoint lies at the boundary after the interrupted iteration 4; a signal during the checkpoint written
    # after iteration 4 (save_interval) comes after that boundary's check, so iteration 5 is finished first
    assert [r["saved_iter"] for r in rows] == [4] * 12 + [5], [(r["point"], r["saved_iter"]) for r in rows]
