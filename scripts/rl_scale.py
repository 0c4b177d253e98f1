"""Real-scale figures of one rl.py step (issue 13 item 5): generation speed, training time and peak GPU memory of
Qwen2.5-0.5B- and 1.5B-class policies with random weights, for several micro_batch_size and gradient-checkpointing
settings.

    python scripts/rl_scale.py --out=results/rl_scale/h200.jsonl     # on the GPU: 0.5b and 1.5b, mbs 1/4/8, ckpt off/on
    python scripts/rl_scale.py --models=1.5b --gen_dtype=bfloat16     # generation under bf16 autocast instead
    python scripts/rl_scale.py --tiny                                 # a CPU miniature of the same, under a minute
    python scripts/rl_scale.py --models=1.5b --rollouts=random --gradient_checkpointing=on   # training rows only

One step as rl.py makes it: num_prompts contrastive prompts (prompting.contrastive_prompt on the project's CUDA kernels
of data/tiny_cuda: one as the reference, two as exemplars with speedups) x num_generations completions from
training.generation.generate (transformers generate, gen_batch_size completions per call), every completion forced to
max_completion_length tokens (min_new_tokens: EOS cannot end it), then rl.grpo_update on all of them (random
advantages; loss_type grpo, beta 0 so no reference model, as rl.py's defaults; float32 weights and AdamW, bf16
autocast) with training.models.completion_logp's chunked head. Models: transformers' Qwen2Config with the Qwen2.5
dimensions of
scripts/sft_speed.py (151,936-token vocabulary), random weights; the tokenizer is a byte-level BPE trained here on
the project's kernel files (sft.train_tokenizer, tokens of at most 6 characters: about 4 characters per token,
near what Qwen's tokenizer gives on code), so nothing is downloaded; prompt lengths are printed. Generation runs once
per model (it does not depend on the training settings), in float32 as rl.py does today (gen_dtype=bfloat16
measures autocast instead). rollouts=random skips generation (gen fields None) and trains on random completion ids
of the same length: the update's time and memory do not depend on token values, so a grid cut by a call's time limit
is finished in a second call without generating again.

One JSON line per (model, micro_batch_size, gradient_checkpointing): gen_s, gen_tokens_per_s (completion tokens /
s), gen_peak_gib, train_s (the last of train_steps updates; the first allocates AdamW's state), train_tokens_per_s
(prompt + completion tokens / s), train_peak_gib, adam_state_gib, step_peak_gib = max(gen_peak + AdamW state,
train_peak) (during a real run the optimizer state stays resident while the next rollouts are generated), status
ok | oom; peaks from torch.cuda.max_memory_allocated (GiB; None on CPU). Then a markdown table, and with eval_s > 0
the projected step time synchronous (gen + eval + train) and with async_rollouts (max(gen, eval) + train).
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

import prompting
import rl
import sft
from training.generation import generate
from training.models import enable_checkpointing, render_prompt
from sft_speed import DIMS

# -----------------------------------------------------------------------------
models = "0.5b,1.5b"  # Qwen2.5-class configs (scripts/sft_speed.py DIMS)
num_prompts = 8
num_generations = 8
max_completion_length = 2048  # every completion runs to this length (min_new_tokens)
gen_batch_size = 64  # completions per generate() call (rl.py's gen_batch_size)
rollouts = "generate"  # generate | random: random completion ids, no generation (finishes a grid cut by a time limit)
gen_dtype = "float32"  # float32: generate as rl.py does (fp32 weights, no autocast); bfloat16: under bf16 autocast
micro_batch_sizes = "1,4,8"
gradient_checkpointing = "both"  # off | on | both
train_steps = 2  # GRPO updates per setup; the last is timed (the first allocates AdamW's state)
logp_chunk_size = 512  # rl.logp_chunk_size
eval_s = 0.0  # seconds of kernel evaluation per step (e.g. t_eval of an H200 log) to project step times; 0 = none
device = "cuda" if torch.cuda.is_available() else "cpu"
dtype = "bfloat16"  # training autocast dtype on CUDA
tiny = False  # a CPU miniature: tiny model, 2 x 2 completions of 32 tokens
out = ""  # JSON-lines file; "" = print only
seed = 0
# -----------------------------------------------------------------------------


def prompts_and_tokenizer(n):
    """n contrastive prompts built from data/tiny_cuda's kernels, and a BPE tokenizer trained on those files."""
    base = os.path.join(ROOT, "data", "tiny_cuda")
    tasks = sorted(d for d in os.listdir(base) if os.path.isdir(os.path.join(base, d)))
    files = {t: sorted(os.listdir(os.path.join(base, t))) for t in tasks}
    src = {(t, f): prompting.parse_variant(open(os.path.join(base, t, f)).read())[0] for t in tasks for f in files[t]}
    prompts = []
    for i in range(n):
        t = tasks[i % len(tasks)]
        fs = files[t][i // len(tasks) % len(files[t]):] + files[t][:i // len(tasks) % len(files[t])]  # rotate
        exemplars = [(src[t, fs[1]], 1.8), (src[t, fs[2 % len(fs)]], 0.7)]
        prompts.append(prompting.contrastive_prompt(src[t, fs[0]], exemplars, "NVIDIA H200"))
    tok = sft.train_tokenizer(list(src.values()) + prompts, 8192, 6)
    return prompts, tok


def gib(x):
    return None if x is None else x / 2 ** 30


def peak(cuda):
    return torch.cuda.max_memory_allocated() if cuda else None


def reset(cuda):
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


if __name__ == "__main__":
    common.configure(globals())
    if tiny:
        models, device, num_prompts, num_generations, max_completion_length = "tiny", "cpu", 2, 2, 32
        gen_batch_size, micro_batch_sizes, train_steps = 4, "1,4", 1
    common.check_device(device)
    cuda = device.startswith("cuda")
    if gradient_checkpointing not in ("off", "on", "both"):
        sys.exit("error: --gradient_checkpointing must be off, on or both")
    for m in models.split(","):
        if m not in DIMS:
            sys.exit(f"error: unknown model {m!r} (known: {', '.join(DIMS)})")
    if rollouts not in ("generate", "random"):
        sys.exit("error: --rollouts must be generate or random")
    ckpts = {"off": [False], "on": [True], "both": [False, True]}[gradient_checkpointing]
    t0 = time.perf_counter()
    prompts, tok = prompts_and_tokenizer(num_prompts)
    print(f"prompts and tokenizer ({len(tok)} tokens) in {time.perf_counter() - t0:.1f}s", flush=True)
    from transformers import Qwen2Config, Qwen2ForCausalLM
    amp_on = cuda and dtype != "float32"
    amp = torch.autocast("cuda", dtype=getattr(torch, dtype), enabled=amp_on)
    gen_amp = torch.autocast("cuda", dtype=torch.bfloat16, enabled=cuda and gen_dtype == "bfloat16")
    # rl.py's settings for grpo_update (module globals there)
    rl.loss_type, rl.num_iterations, rl.beta, rl.temperature, rl.grad_clip = "grpo", 1, 0.0, 1.0, 1.0
    rl.epsilon, rl.epsilon_high, rl.max_completion_length = 0.2, 0.2, max_completion_length
    rl.logp_chunk_size = logp_chunk_size
    results = []
    for name in models.split(","):
        torch.manual_seed(seed)
        dims = dict(DIMS[name], vocab_size=max(DIMS[name]["vocab_size"], len(tok)))  # the tiny config's 1000 < BPE's
        cfg = Qwen2Config(max_position_embeddings=32768, bos_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id,
                          pad_token_id=tok.pad_token_id, **dims)
        with torch.device(device):
            model = Qwen2ForCausalLM(cfg).float()
        n_params = sum(p.numel() for p in model.parameters())
        # 1. rollouts, forced to full length
        size = f"{n_params / 1e6:.{0 if n_params >= 1e7 else 2}f}M params"
        print(f"{name}: {size}; " + (f"generating {num_prompts} x {num_generations} x "
              f"{max_completion_length} tokens ({gen_dtype})" if rollouts == "generate" else "random rollouts"),
              flush=True)   # minutes for 1.5B in float32
        reset(cuda)
        t0 = time.perf_counter()
        if rollouts == "generate":
            with gen_amp:
                samples = list(generate(model, tok, prompts, num_generations, max_completion_length, 1.0, 1.0,
                                               batch_size=gen_batch_size, min_new_tokens=max_completion_length))
        else:  # the prompts' own tokens, completions drawn uniformly from the vocabulary (seeded)
            g = torch.Generator().manual_seed(seed)
            samples = [dict(prompt_ids=tok(render_prompt(tok, p), add_special_tokens=False)["input_ids"],
                            completion_ids=torch.randint(len(tok), (max_completion_length,), generator=g).tolist(),
                            truncated=True) for p in prompts for _ in range(num_generations)]
        if cuda:
            torch.cuda.synchronize()
        gen_s = time.perf_counter() - t0 if rollouts == "generate" else None
        gen_peak = peak(cuda) if rollouts == "generate" else None
        lens = [len(s["completion_ids"]) for s in samples]
        assert min(lens) == max_completion_length, f"a rollout stopped early: {min(lens)} tokens"
        prompt_tokens = [len(s["prompt_ids"]) for s in samples]
        gen = dict(model=name, params_m=n_params / 1e6, num_prompts=num_prompts, num_generations=num_generations,
                   max_completion_length=max_completion_length, prompt_tokens_mean=sum(prompt_tokens) / len(samples),
                   prompt_tokens_max=max(prompt_tokens), gen_batch_size=gen_batch_size, gen_dtype=gen_dtype,
                   rollouts=rollouts, gen_s=gen_s and round(gen_s, 3), gen_tokens_per_s=gen_s and sum(lens) / gen_s,
                   gen_peak_gib=gib(gen_peak),
                   device=torch.cuda.get_device_name() if cuda else "cpu", torch=torch.__version__)
        print(f"{name}: {size} | " + (
              f"generated {len(samples)} x {max_completion_length} tokens in {gen_s:.1f}s = "
              f"{gen['gen_tokens_per_s']:.0f} tok/s" if gen_s else f"{len(samples)} random completions of "
              f"{max_completion_length} tokens") + f" (prompts {gen['prompt_tokens_mean']:.0f} tokens on average)",
              flush=True)
        # 2. the GRPO update, per setting
        adv = torch.randn(len(samples), generator=torch.Generator().manual_seed(seed))
        for ckpt in ckpts:
            if ckpt:
                enable_checkpointing(model)
            else:
                (getattr(model, "activation_checkpointing_disable", None) or model.gradient_checkpointing_disable)()
            model.train()
            for mbs in (int(b) for b in micro_batch_sizes.split(",")):
                rl.micro_batch_size = mbs
                row = dict(gen, micro_batch_size=mbs, gradient_checkpointing=ckpt, logp_chunk_size=logp_chunk_size,
                           adam_state_gib=gib(8 * n_params), train_steps=train_steps)
                opt = None
                try:
                    reset(cuda)
                    opt = torch.optim.AdamW(model.parameters(), lr=1e-6, betas=(0.9, 0.99))
                    for _ in range(train_steps):
                        if cuda:
                            torch.cuda.synchronize()
                        t0 = time.perf_counter()
                        rl.grpo_update(model, None, opt, samples, adv, tok.pad_token_id, amp, 1)
                        if cuda:
                            torch.cuda.synchronize()
                        train_s = time.perf_counter() - t0
                    tokens = sum(len(s["prompt_ids"]) + len(s["completion_ids"]) for s in samples)
                    row.update(status="ok", train_s=round(train_s, 3), train_tokens_per_s=tokens / train_s,
                               train_peak_gib=gib(peak(cuda)))
                    if cuda and gen_peak is not None:
                        row["step_peak_gib"] = max(row["gen_peak_gib"] + row["adam_state_gib"], row["train_peak_gib"])
                    if eval_s > 0 and gen_s:
                        row.update(eval_s=eval_s, projected_step_s_sync=gen_s + eval_s + train_s,
                                   projected_step_s_async=max(gen_s, eval_s) + train_s)
                except torch.OutOfMemoryError as e:
                    row.update(status="oom", error=str(e).splitlines()[0][:200], train_peak_gib=gib(peak(cuda)))
                del opt
                model.zero_grad(set_to_none=True)
                print(json.dumps(row), flush=True)
                results.append(row)
                if out:
                    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
                    common.append_jsonl(out, row)
        del model, samples
        reset(cuda)
    f = lambda v, spec: "n/a" if v is None else format(v, spec)
    gen_how = ("no generation (random completions)" if rollouts == "random" else
               f"generation in {gen_dtype if cuda else 'float32'}")
    print(f"\n{num_prompts} prompts x {num_generations} completions of {max_completion_length} tokens, "
          f"{results[0]['device']}, {gen_how}, training "
          f"{'under ' + dtype + ' autocast' if amp_on else 'in float32'} with float32 weights\n")
    print("| model | mbs | grad ckpt | gen tok/s | gen s | train s | train tok/s | peak gen (GiB) | peak train (GiB) "
          "| step peak (GiB) | status |")
    print("|:---|---:|:---:|---:|---:|---:|---:|---:|---:|---:|:---|")
    for r in results:
        print(f"| {r['model']} | {r['micro_batch_size']} | {'on' if r['gradient_checkpointing'] else 'off'} | "
              f"{f(r['gen_tokens_per_s'], '.0f')} | {f(r['gen_s'], '.1f')} | {f(r.get('train_s'), '.1f')} | "
              f"{f(r.get('train_tokens_per_s'), '.0f')} | {f(r['gen_peak_gib'], '.1f')} | "
              f"{f(r.get('train_peak_gib'), '.1f')} | {f(r.get('step_peak_gib'), '.1f')} | {r['status']} |")
    if eval_s > 0:
        for r in results:
            if r["status"] == "ok" and r.get("projected_step_s_sync"):
                ckpt = 'on' if r['gradient_checkpointing'] else 'off'
                print(f"{r['model']} mbs {r['micro_batch_size']} ckpt {ckpt}: "
                      f"projected step {r['projected_step_s_sync']:.0f}s synchronous, "
                      f"{r['projected_step_s_async']:.0f}s with async_rollouts (eval {eval_s:.0f}s)")
