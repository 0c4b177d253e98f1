"""Peak memory of training.models.completion_logp, chunked and as one full-vocabulary log-softmax, for a
Qwen2.5-class policy with random weights.

    python scripts/logp_memory.py      # on the GPU: 0.5b config, one 4k-token row, B = 1 and 8
    python scripts/logp_memory.py --model=1.5b --micro_batch_sizes=1,4 --out=results/logp_memory/h200.jsonl
    python scripts/logp_memory.py --device=cpu                     # a CPU check of the script: tiny config, short rows
    python scripts/logp_memory.py --device=cpu --model=0.5b --layers=1 --prompt_len=512 --completion_len=3584 \
        --micro_batch_sizes=1 --chunk_sizes=0,512                  # the head at real size on a CPU (peak RSS)

"full" is completion_logp with no chunked head (copied below: the whole (B, C, V) float32 log-softmax, the
entropy from its exp); "chunk=N" is today's training.models.completion_logp with logp_chunk_size=N (0 = one chunk, still
without
the log-softmax tensor). Each is measured without gradients (how rl.py computes old and reference log-probs) and with
a backward pass (the training forward), under bf16 autocast on float32 weights as rl.py runs. The model comes from
transformers' Qwen2Config with Qwen2.5-0.5B / 1.5B dimensions (scripts/sft_speed.py's DIMS; 151,936-token vocabulary),
random weights, nothing downloaded. One JSON line per setup: model, micro_batch_size (rows), prompt_len,
completion_len (tokens), method, grad, status (ok | oom), seconds, peak_extra_gib = torch.cuda.max_memory_allocated
during the call minus the memory allocated before it (GiB; on the CPU the process's peak resident set during the call,
VmHWM after resetting it through /proc/self/clear_refs, minus VmRSS before it: torch's CPU allocator hands tensors of
more than a few MB back to the OS when freed, so this follows the tensors; None where /proc lacks it),
full_logits_gib = B x C x V x 4 bytes / 2**30 (the size of one fp32 full-vocabulary tensor), and max_abs_diff_logp /
max_abs_diff_entropy against "full" on the same rows. Then a markdown table.
"""
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import torch

import common
from training.models import completion_logp, pad_rows
from sft_speed import DIMS

# -----------------------------------------------------------------------------
model = ""  # 0.5b | 1.5b | tiny; "" = 0.5b on CUDA, tiny on the CPU
layers = 0  # decoder layers; 0 = the config's (the LM head's memory, what differs between methods, is the same at 1)
prompt_len = 0  # tokens; 0 = 512 on CUDA (a 4k-token row with completion_len), 32 on the CPU
completion_len = 0  # tokens; 0 = 3584 on CUDA, 224 on the CPU
micro_batch_sizes = "1,8"  # rows per call (rl.py's micro_batch_size)
chunk_sizes = "0,256,512,1024"  # logp_chunk_size values to measure next to "full"
device = "cuda" if torch.cuda.is_available() else "cpu"
dtype = "bfloat16"  # autocast dtype on CUDA; weights stay float32 as in rl.py
out = ""  # JSON-lines file; "" = print only
seed = 0
# -----------------------------------------------------------------------------


def full_vocab_logp(model, rows, pad_id, temp):
    """completion_logp without chunks: the whole (B, C, V) fp32 log-softmax and its entropy (the memory baseline)."""
    ids, att, P = pad_rows(rows, pad_id, next(model.parameters()).device)  # (B, P + C) each
    C = ids.shape[1] - P
    pos = (att.cumsum(-1) - 1).clamp(min=0)
    logits = model(input_ids=ids, attention_mask=att, position_ids=pos).logits[:, P - 1:P + C - 1].float() / temp
    lsm = torch.log_softmax(logits, dim=-1)  # (B, C, V)
    logp = lsm.gather(-1, ids[:, P:].unsqueeze(-1)).squeeze(-1)  # (B, C)
    with torch.no_grad():
        ent = -(lsm.exp() * lsm).sum(-1)
    return logp, ent, att[:, P:].float()


def _status_gib(key):
    """VmRSS / VmHWM of this process from /proc/self/status, in GiB."""
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 2 ** 20
    raise KeyError(key)


def _reset_cpu_peak():
    """Resets VmHWM to the current RSS (Linux >= 4.0); the RSS now, or None where that is not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return _status_gib("VmRSS")
    except (OSError, KeyError):
        return None


def run_one(policy, rows, method, grad, amp, cuda):
    """One call (and a backward when grad): (logp, entropy, seconds, peak_extra_gib)."""
    policy.zero_grad(set_to_none=True)
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated() if cuda else _reset_cpu_peak()
    t0 = time.perf_counter()
    with torch.set_grad_enabled(grad), amp:
        if method == "full":
            logp, ent, m = full_vocab_logp(policy, rows, 0, 1.0)
        else:
            logp, ent, m = completion_logp(policy, rows, 0, 1.0, chunk_size=int(method.split("=")[1]))
    if grad:
        (logp * m).sum().backward()
    if cuda:
        torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    peak = (torch.cuda.max_memory_allocated() - base) / 2 ** 30 if cuda else \
        (None if base is None else _status_gib("VmHWM") - base)
    return logp.detach().float(), ent.float(), dt, peak


if __name__ == "__main__":
    common.configure(globals())
    common.check_device(device)
    cuda = device.startswith("cuda")
    model = model or ("0.5b" if cuda else "tiny")
    prompt_len = prompt_len or (512 if cuda else 32)
    completion_len = completion_len or (3584 if cuda else 224)
    if model not in DIMS:
        sys.exit(f"error: unknown --model={model!r} (known: {', '.join(DIMS)})")
    from transformers import Qwen2Config, Qwen2ForCausalLM
    torch.manual_seed(seed)
    dims = dict(DIMS[model], **({"num_hidden_layers": layers} if layers else {}))
    cfg = Qwen2Config(max_position_embeddings=max(32768, prompt_len + completion_len), use_cache=False, **dims)
    with torch.device(device):
        policy = Qwen2ForCausalLM(cfg).float().train()
    amp = torch.autocast("cuda", dtype=getattr(torch, dtype), enabled=cuda and dtype != "float32")
    methods = ["full"] + [f"chunk={int(c)}" for c in chunk_sizes.split(",")]
    results = []
    for B in (int(b) for b in micro_batch_sizes.split(",")):
        g = torch.Generator().manual_seed(seed + B)
        rows = [dict(prompt_ids=torch.randint(1, cfg.vocab_size, (prompt_len,), generator=g).tolist(),
                     completion_ids=torch.randint(1, cfg.vocab_size, (completion_len,), generator=g).tolist())
                for _ in range(B)]
        for grad in (False, True):
            ref = None
            for method in methods:
                row = dict(model=model, layers=cfg.num_hidden_layers,
                           params_m=sum(p.numel() for p in policy.parameters()) / 1e6,
                           micro_batch_size=B, prompt_len=prompt_len, completion_len=completion_len, method=method,
                           grad=grad, device=torch.cuda.get_device_name() if cuda else "cpu",
                           dtype=dtype if cuda else "float32",   # no autocast on the CPU (as rl.py)
                           full_logits_gib=B * completion_len * cfg.vocab_size * 4 / 2 ** 30)
                try:
                    logp, ent, dt, peak = run_one(policy, rows, method, grad, amp, cuda)
                    row.update(status="ok", seconds=round(dt, 4), peak_extra_gib=peak)
                    if method == "full":
                        ref = (logp, ent)
                    elif ref is not None:
                        row.update(max_abs_diff_logp=(logp - ref[0]).abs().max().item(),
                                   max_abs_diff_entropy=(ent - ref[1]).abs().max().item())
                except torch.OutOfMemoryError as e:
                    row.update(status="oom", error=str(e).splitlines()[0][:200],
                               peak_extra_gib=torch.cuda.max_memory_allocated() / 2 ** 30 if cuda else None)
                    policy.zero_grad(set_to_none=True)
                print(json.dumps(row), flush=True)
                results.append(row)
                if out:
                    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
                    common.append_jsonl(out, row)
    fmt = lambda v, f: "n/a" if v is None else format(v, f)
    pm = results[0]["params_m"]
    print(f"\n{model}, {cfg.num_hidden_layers} layers ({pm:.{0 if pm >= 10 else 2}f}M params), rows of {prompt_len} "
          f"prompt + {completion_len} completion "
          f"tokens, {results[0]['device']}; peak = extra memory during the call (GiB; "
          f"{'allocated by torch' if cuda else 'resident set'})\n")
    print("| rows | grad | method | status | peak extra (GiB) | s | max abs diff logp vs full |")
    print("|---:|:---:|:---|:---|---:|---:|---:|")
    for r in results:
        print(f"| {r['micro_batch_size']} | {'yes' if r['grad'] else 'no'} | {r['method']} | {r['status']} | "
              f"{fmt(r.get('peak_extra_gib'), '.2f')} | {fmt(r.get('seconds'), '.3f')} | "
              f"{fmt(r.get('max_abs_diff_logp'), '.1e')} |")
