"""
Stages 1 and 2 of CUDA-L1: supervised fine-tuning on (prompt, response) pairs, in plain PyTorch.

    python sft.py --init_from=Qwen/Qwen2.5-Coder-1.5B-Instruct --data=out/sft.jsonl   # a Hugging Face model
    python sft.py --preset=tiny                                                       # a tiny model from scratch

The loss is next-token cross-entropy on the response tokens (and the EOS that ends them) only: the prompt is
context, not a target (REFERENCE.md §1.1: "(instruction + reference) -> variant"). init_from="tiny" builds a small
Llama from a config and trains a byte-level BPE tokenizer on the data itself, so nothing is downloaded. Without
pre-tokenisation the BPE merges may cross spaces and newlines (up to max_token_length characters), which keeps the
tiny run's sequences short: about 300 prompt and 100 answer tokens for a 3,000-character kernel.

Output (out_dir/sft): the model and tokenizer in the Hugging Face format (transformers and vLLM load it), and
state.pt (optimizer, iteration, RNG) for --resume.
"""
import math
import os
import random
import time

import torch
import torch.nn.functional as F

import common

# -----------------------------------------------------------------------------
# config
init_from = "Qwen/Qwen2.5-Coder-1.5B-Instruct"  # HF name or folder, or "tiny" (a model built from the config below)
out_dir = "out"
data = ""  # JSONL of {prompt, response}; default out_dir/sft.jsonl
# the tiny model (init_from="tiny")
vocab_size = 4096
max_token_length = 32  # longest merged token, in characters (no pre-tokenisation: merges cross spaces/newlines)
n_layer = 2
n_head = 4
n_embd = 128
block_size = 8192
# training
max_len = 4096  # tokens per example; longer prompts are cut from the left
batch_size = 8
grad_accum = 1
max_iters = 300
lr = 1e-5
min_lr = 1e-6
warmup_iters = 10
weight_decay = 0.0
grad_clip = 1.0
val_fraction = 0.1
eval_interval = 50
log_interval = 10
device = "cuda" if torch.cuda.is_available() else "cpu"
dtype = "bfloat16"  # autocast dtype on CUDA; the weights and optimizer stay in float32
gradient_checkpointing = False
resume = False
seed = 1337
# -----------------------------------------------------------------------------


def train_tokenizer(texts, size, max_chars=32):
    """A byte-level BPE tokenizer trained on `texts` (no download). Any string encodes: the 256 bytes are in it.
    max_chars caps a token's length: uncapped, a corpus of a few dozen kernels turns whole prompts into single
    tokens, and the "model" would only pick among memorised kernels instead of writing them."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=size, special_tokens=["<|endoftext|>", "<|pad|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
                                  max_token_length=max_chars)
    tok.train_from_iterator(texts, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", pad_token="<|pad|>")


def tiny_model(tok):
    """A small Llama (RoPE, so long prompts need no learned positions) sized by the config globals."""
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=n_embd, intermediate_size=4 * n_embd, num_hidden_layers=n_layer,
                      num_attention_heads=n_head, num_key_value_heads=n_head, max_position_embeddings=block_size,
                      bos_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                      tie_word_embeddings=True)
    return LlamaForCausalLM(cfg)


def sft_loss(model, ids, mask):
    """Mean cross-entropy over the tokens where mask == 1. ids, mask: (B, T) long; padding has mask 0."""
    logits = model(input_ids=ids).logits  # (B, T, V); right padding needs no attention mask under a causal model
    logits, targets, m = logits[:, :-1].float(), ids[:, 1:], mask[:, 1:].float()  # token t predicts t+1
    nll = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), reduction="none")
    return (nll * m.reshape(-1)).sum() / m.sum().clamp(min=1.0)


def collate(examples, pad_id, dev):
    """Right-pad a list of (ids, mask) to (B, T) tensors."""
    T = max(len(x) for x, _ in examples)
    ids = torch.full((len(examples), T), pad_id, dtype=torch.long)
    mask = torch.zeros((len(examples), T), dtype=torch.long)
    for i, (x, m) in enumerate(examples):
        ids[i, :len(x)] = torch.tensor(x)
        mask[i, :len(m)] = torch.tensor(m)
    return ids.to(dev), mask.to(dev)


def lr_at(it):
    """Linear warm-up, then cosine decay to min_lr at max_iters."""
    if it < warmup_iters:
        return lr * (it + 1) / warmup_iters
    t = min(1.0, (it - warmup_iters) / max(1, max_iters - warmup_iters))
    return min_lr + 0.5 * (1 + math.cos(math.pi * t)) * (lr - min_lr)


def train(model, tok, rows, save_dir):
    """The SFT loop over rows [{prompt, response}]; saves to save_dir; returns the history of (iter, train, val)."""
    rng = random.Random(seed)
    torch.manual_seed(seed)
    examples = [common.encode_example(tok, r["prompt"], r["response"], max_len) for r in rows]
    rng.shuffle(examples)
    n_val = int(len(examples) * val_fraction) if len(examples) >= 10 else 0
    val, tr = examples[:n_val], examples[n_val:]
    model.to(device).train()
    if gradient_checkpointing:
        model.gradient_checkpointing_enable()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay, betas=(0.9, 0.95))
    it, history = 0, []
    state_path = os.path.join(save_dir, "state.pt")
    if resume and os.path.exists(state_path):
        st = torch.load(state_path, weights_only=False)
        opt.load_state_dict(st["opt"])
        it, history = st["iter"], st["history"]
        rng.setstate(st["py_rng"])
        torch.set_rng_state(st["torch_rng"])
        print(f"resumed at iter {it}")
    amp = torch.autocast("cuda", dtype=getattr(torch, dtype), enabled="cuda" in device and dtype != "float32")

    def save():
        os.makedirs(save_dir, exist_ok=True)
        model.save_pretrained(save_dir)
        tok.save_pretrained(save_dir)
        torch.save(dict(opt=opt.state_dict(), iter=it, history=history, py_rng=rng.getstate(),
                        torch_rng=torch.get_rng_state()), state_path + ".tmp")
        os.replace(state_path + ".tmp", state_path)

    def val_loss():
        if not val:
            return float("nan")
        model.eval()
        with torch.no_grad(), amp:
            losses = [sft_loss(model, *collate(val[i:i + batch_size], tok.pad_token_id, device)).item()
                      for i in range(0, len(val), batch_size)]
        model.train()
        return sum(losses) / len(losses)

    t0 = time.time()
    try:
        while it < max_iters:
            for g in opt.param_groups:
                g["lr"] = lr_at(it)
            total = 0.0
            for _ in range(grad_accum):
                batch = rng.sample(tr, min(batch_size, len(tr)))
                with amp:
                    loss = sft_loss(model, *collate(batch, tok.pad_token_id, device)) / grad_accum
                loss.backward()
                total += loss.item()
            torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
            opt.step()
            opt.zero_grad(set_to_none=True)
            it += 1
            if it % log_interval == 0 or it == max_iters:
                v = val_loss() if (it % eval_interval == 0 or it == max_iters) else float("nan")
                history.append((it, total, v))
                vs = f" | val {v:.4f}" if v == v else ""  # only on evaluation iterations (and with a val set)
                print(f"iter {it:5d} | loss {total:.4f}{vs} | lr {lr_at(it):.2e} | {time.time() - t0:.0f}s")
    except KeyboardInterrupt:
        print("interrupted: saving a checkpoint (resume with --resume)")
        save()
        raise
    save()
    return history


if __name__ == "__main__":
    common.configure(globals())
    common.check_device(device)
    data = data or os.path.join(out_dir, "sft.jsonl")
    if not os.path.exists(data):
        raise SystemExit(f"error: no SFT data {data!r}: run prepare.py first or give --data=FILE.jsonl")
    rows = common.read_jsonl(data)
    assert rows and all("prompt" in r and "response" in r for r in rows), f"{data}: rows need 'prompt' and 'response'"
    save_dir = os.path.join(out_dir, "sft")
    if resume and os.path.exists(os.path.join(save_dir, "state.pt")):
        model, tok = common.load_model(save_dir)
    elif init_from == "tiny":
        tok = train_tokenizer([r["prompt"] + r["response"] for r in rows], vocab_size, max_token_length)
        model = tiny_model(tok)
    else:
        try:
            model, tok = common.load_model(init_from)
        except RuntimeError as e:
            raise SystemExit(f"error: {e}")
    print(f"{len(rows)} examples, model {init_from}: {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M params")
    train(model, tok, rows, save_dir)
    print(f"saved to {save_dir}")
