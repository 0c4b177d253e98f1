"""Memory and speed of sft.py's training step for Qwen2.5-class models.

    python scripts/sft_speed.py --models=0.5b,1.5b --seq_len=4096 --out=results/sft_speed/h200.json   # on a GPU
    python scripts/sft_speed.py --models=tiny --device=cpu --iters=2 --seq_len=64                     # smoke test

The models are built from transformers' Qwen2Config with the dimensions of Qwen2.5-0.5B and Qwen2.5-1.5B written
out below (from their published config.json files), with random weights: nothing is downloaded, and speed and
memory do not depend on the weights' values. One iteration is exactly sft.py's: forward under bf16 autocast (dtype),
sft.sft_loss (cross-entropy on the response half of each sequence, logits in float32), backward, gradient
clipping, AdamW step; weights and AdamW state in param_dtype (sft.py's default float32). For each model and each
gradient-checkpointing setting: `warmup` untimed iterations, then `iters` timed ones (device synchronised).
Prints and writes (JSON list) per configuration: model, params (M), seq_len, batch_size, gradient_checkpointing,
tokens_per_s (B x T x iters / seconds), s_per_iter, peak_mem_gib (torch.cuda.max_memory_allocated / 2**30; None
on CPU), or status "oom" with the error when it does not fit.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import torch

import common
import sft
from training.models import enable_checkpointing

# -----------------------------------------------------------------------------
models = "0.5b,1.5b"
seq_len = 4096  # tokens per sequence (prompt half, response half)
batch_size = 1
iters = 10
warmup = 2
gradient_checkpointing = "both"  # on | off | both
device = "cuda" if torch.cuda.is_available() else "cpu"
dtype = "bfloat16"  # autocast dtype on CUDA
param_dtype = "float32"
lr = 1e-5
out = ""  # JSON file; "" = print only
seed = 0
# -----------------------------------------------------------------------------

# Qwen2.5 dimensions (config.json of Qwen/Qwen2.5-0.5B, -1.5B, -3B and -7B; the Coder variants share them; 3B ties its
# embeddings, 7B does not)
DIMS = {
    "0.5b": dict(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                 num_attention_heads=14, num_key_value_heads=2, tie_word_embeddings=True),
    "1.5b": dict(vocab_size=151936, hidden_size=1536, intermediate_size=8960, num_hidden_layers=28,
                 num_attention_heads=12, num_key_value_heads=2, tie_word_embeddings=True),
    "3b": dict(vocab_size=151936, hidden_size=2048, intermediate_size=11008, num_hidden_layers=36,
               num_attention_heads=16, num_key_value_heads=2, tie_word_embeddings=True),
    "7b": dict(vocab_size=152064, hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
               num_attention_heads=28, num_key_value_heads=4, tie_word_embeddings=False),
    "tiny": dict(vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True),
}


def measure(name, ckpt):
    """One configuration: returns the result dict (see the module docstring)."""
    from transformers import Qwen2Config, Qwen2ForCausalLM
    cuda = device.startswith("cuda")
    torch.manual_seed(seed)
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    cfg = Qwen2Config(max_position_embeddings=max(32768, seq_len), use_cache=False, **DIMS[name])
    row = dict(model=name, seq_len=seq_len, batch_size=batch_size, gradient_checkpointing=ckpt, dtype=dtype,
               param_dtype=param_dtype, device=device,
               device_name=torch.cuda.get_device_name() if cuda else "cpu", torch_version=torch.__version__)
    model = opt = None
    try:
        with torch.device(device):  # random init on the device: seconds instead of a minute on the CPU
            model = Qwen2ForCausalLM(cfg).to(dtype=getattr(torch, param_dtype)).train()
        row["params_m"] = sum(p.numel() for p in model.parameters()) / 1e6
        if ckpt:
            enable_checkpointing(model)
        opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95))
        amp = torch.autocast("cuda", dtype=getattr(torch, dtype), enabled=cuda and dtype != "float32")
        ids = torch.randint(0, cfg.vocab_size, (batch_size, seq_len), device=device)  # (B, T)
        mask = torch.zeros_like(ids)
        mask[:, seq_len // 2:] = 1  # loss on the response half, as in SFT
        for i in range(warmup + iters):
            if i == warmup:
                if cuda:
                    torch.cuda.synchronize()
                t0 = time.perf_counter()
            with amp:
                loss = sft.sft_loss(model, ids, mask)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
        if cuda:
            torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        row.update(status="ok", loss=loss.item(), s_per_iter=dt / iters, tokens_per_s=batch_size * seq_len * iters / dt,
                   peak_mem_gib=torch.cuda.max_memory_allocated() / 2 ** 30 if cuda else None)
    except torch.OutOfMemoryError as e:
        row.update(status="oom", error=str(e).splitlines()[0][:300],
                   peak_mem_gib=torch.cuda.max_memory_allocated() / 2 ** 30 if cuda else None)
    finally:
        del model, opt
    return row


if __name__ == "__main__":
    common.configure(globals())
    common.check_device(device)
    for m in models.split(","):
        if m not in DIMS:
            sys.exit(f"error: unknown model {m!r} (known: {', '.join(DIMS)})")
    if gradient_checkpointing not in ("on", "off", "both"):
        sys.exit("error: --gradient_checkpointing must be on, off or both")
    settings = {"on": [True], "off": [False], "both": [False, True]}[gradient_checkpointing]
    rows = []
    for m in models.split(","):
        for ckpt in settings:
            r = measure(m, ckpt)
            rows.append(r)
            mem = f"{r['peak_mem_gib']:.1f} GiB" if r.get("peak_mem_gib") is not None else "n/a (cpu)"
            if r["status"] == "ok":
                print(f"{m:>5} {r['params_m']:7.1f}M | T={seq_len} B={batch_size} | "
                      f"grad ckpt {'on ' if ckpt else 'off'} | "
                      f"{r['tokens_per_s']:9.0f} tok/s | {r['s_per_iter']:.3f} s/iter | peak {mem}", flush=True)
            else:
                print(f"{m:>5} | T={seq_len} B={batch_size} | grad ckpt {'on ' if ckpt else 'off'} | OOM: {r['error']}")
            if out:  # after every configuration, so a later OOM or kill keeps the earlier rows
                os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
                common.write_json_atomic(out, rows)
