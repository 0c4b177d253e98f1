"""Where the static rollout engine's time goes: decode tokens/s of a random Qwen2.5-shaped policy under five variants of
training/sampler.py's static path, on the prompts of scripts/rl_scale.py, every answer forced to new_tokens tokens.

    python scripts/static_decode_probe.py                          # 1.5B, 64 answers, prompts padded as rl.py pads
    python scripts/static_decode_probe.py --prompt_pad=0 --new_tokens=256

Variants, each after one untimed call at the same shapes (the compile): sdpa (transformers' static cache and its own
sdpa attention, which repeats each key/value head per query head under compile), plain (the same with the sampler's
attention, training/sampler.py's GQA_DECODE), recorder (+ the per-step log-prob recorder of the sampler), stop (+
rl_scale's forced-EOS processor), sampler (training.sampler.sample itself, as rl.py and rl_scale.py call it). Prints
one JSON line per variant: tok/s, ms per decode step, torch._dynamo's counters (recompiles, graph breaks) after the
call, peak GiB.
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
import rl_scale
from training import sampler
from training.models import render_prompt

# -----------------------------------------------------------------------------
# config
model = "1.5b"  # scripts/sft_speed.py DIMS
num_answers = 64  # answers per call (one batch)
new_tokens = 512  # decode steps per call
prompt_pad = sampler.PROMPT_PAD  # left-pad prompts to a multiple of this (0: no padding beyond the longest prompt)
variants = "sdpa,plain,recorder,stop,sampler"
# -----------------------------------------------------------------------------


def counters():
    from torch._dynamo.utils import counters as dynamo_counters
    return {k: dict(v) for k, v in dynamo_counters.items() if k in ("stats", "recompiles", "graph_break")}


def main():
    from transformers import GenerationConfig, LogitsProcessorList
    prompts, tok = rl_scale.prompts_and_tokenizer(8)
    policy = sampler.sampler_copy(rl_scale.build(model, tok), "static")  # bf16 on CUDA
    flat = [p for p in prompts for _ in range(num_answers // len(prompts))]
    tok.padding_side = "left"
    pad = dict(pad_to_multiple_of=prompt_pad) if prompt_pad else {}
    enc = tok([render_prompt(tok, p) for p in flat], return_tensors="pt", padding=True,
              add_special_tokens=False, **pad).to(policy.device)
    prompt_len = enc["input_ids"].shape[1]
    config = GenerationConfig(do_sample=True, temperature=1.0, top_p=1.0, top_k=0, repetition_penalty=1.0,
                              max_new_tokens=new_tokens, min_new_tokens=new_tokens, pad_token_id=tok.pad_token_id,
                              eos_token_id=tok.eos_token_id, cache_implementation="static", use_cache=True)

    def call(variant):
        policy.set_attn_implementation("sdpa" if variant == "sdpa" else sampler.GQA_DECODE)
        if variant == "sampler":
            rows = sampler.sample("static", policy, policy, tok, flat, 1, new_tokens, 1.0, 1.0, len(flat),
                                  stop_at=[new_tokens] * len(flat))
            return sum(len(r["completion_ids"]) for r in rows)
        processors = []
        if variant == "stop":
            processors.append(sampler._StopAt(torch.full((len(flat),), new_tokens), prompt_len, tok.eos_token_id))
        if variant in ("recorder", "stop"):
            processors.append(sampler._LogpRecorder())
        out = policy.generate(**enc, generation_config=config, logits_processor=LogitsProcessorList(processors))
        return (out.shape[1] - prompt_len) * out.shape[0]

    print(f"{model}: {len(flat)} answers, prompts padded to {prompt_len} tokens, {new_tokens} new tokens", flush=True)
    for variant in variants.split(","):
        t0 = time.perf_counter()
        call(variant)                                      # compiles (or reuses) at these shapes
        torch.cuda.synchronize()
        warm = time.perf_counter() - t0
        torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        tokens = call(variant)
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        print(json.dumps(dict(variant=variant, model=model, prompt_len=prompt_len, answers=len(flat),
                              new_tokens=new_tokens, tokens=tokens, s=round(dt, 2), tok_s=round(tokens / dt),
                              ms_per_step=round(dt / new_tokens * 1e3, 2), warmup_s=round(warm, 1),
                              peak_gib=round(torch.cuda.max_memory_allocated() / 2 ** 30, 1),
                              dynamo=counters())), flush=True)


if __name__ == "__main__":
    common.configure(globals())
    if not torch.cuda.is_available():
        sys.exit("error: static_decode_probe.py measures the CUDA static engine; no CUDA GPU is visible")
    rl_scale.device = "cuda"
    main()
