"""Real-scale figures of one rl.py step: generation speed by rollout engine, training speed, peak GPU memory and the
projected step time of Qwen2.5-shaped policies (0.5B-7B, random weights); and which settings fit an 80 GB A100.

    python scripts/rl_scale.py --out=rl_scale.jsonl                  # on the GPU: the item tables, ~6 min per model
    python scripts/rl_scale.py --models=1.5b --eval_s=86              # one model; eval_s projects the step time
    python scripts/rl_scale.py --report=rl_scale.jsonl                # the tables again from the JSON lines of runs
    python scripts/rl_scale.py --fit --out=fit.jsonl                  # the 80 GB fit table (1.5B / 3B / 7B)
    python scripts/rl_scale.py --tiny                                 # a CPU miniature of both, well under a minute

One step as rl.py makes it: num_prompts contrastive prompts (prompting.contrastive_prompt on data/tiny_cuda's kernels)
x num_generations answers. Each answer's length is drawn uniformly (seeded) from [min_completion_length,
max_completion_length] and the answer is stopped there (training/sampler.py's stop_at: a forced EOS, or continuous
batching's per-request limit), since a random-weight model never ends by itself. Engines (training/sampler.py):
"generate" is the old path (the float32 training weights, DynamicCache) and is measured on old_tokens tokens per answer
only (min_new_tokens), to save GPU time: its tok/s at that short length is an upper bound of its speed on full answers;
"static" and "continuous" sample from the bf16 copy, after one untimed warm-up call (the first compile is paid once per
run; continuous batching's per-call warm-up is inside the timed call, as rl.py pays it every step). Then rl.grpo_update
on the answers of the last new engine (float32 weights and AdamW, bf16 autocast, loss grpo, beta 0), train_steps times
per (micro_batch_size, gradient_checkpointing), the last one timed; fsdp=True shards the policy first
(training.sharding.shard_model: FSDP2 over the ranks, here one). Models: transformers' Qwen2Config with the Qwen2.5
dimensions of scripts/sft_speed.py; a byte-level BPE tokenizer trained here on the kernel files (sft.train_tokenizer),
so nothing is downloaded. Peaks: torch.cuda.max_memory_allocated, GiB (None on the CPU). Projected step: generation +
eval_s + training (old: the old path's tok/s applied to the same answers; async: max(generation, eval_s) + training).

--fit: the process's memory is capped at fit_gib (torch.cuda.set_per_process_memory_fraction), of which vllm_share is
taken first by a stand-in allocation for the sampler (a colocated vLLM engine, or the bf16 copy and its KV cache); then
for each model and setting one GRPO step (AdamW's state allocated) on micro_batch_size answers of fit_length tokens:
"fits" or "oom" with the peak. JSON lines (kind gen | train | fit), then markdown tables.
"""
import gc
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
from training import sampler
from training.generation import generate
from training.models import enable_checkpointing, render_prompt
from training.sharding import shard_model
from sft_speed import DIMS


# -----------------------------------------------------------------------------
models = "0.5b,1.5b,3b,7b"  # Qwen2.5-class configs (scripts/sft_speed.py DIMS)
engines = "generate,static,continuous"  # generate = the old path; static, continuous: training/sampler.py
num_prompts = 8
num_generations = 8
max_completion_length = 2048  # the longest answer
min_completion_length = 128  # the shortest: lengths drawn uniformly in between
old_tokens = 64  # the old path ("generate") measured on answers of this many tokens (min_new_tokens)
gen_batch_size = 64  # completions per generate() call (generate and static engines)
rollouts = "generate"  # generate | random: random completion ids of the drawn lengths, no generation
micro_batch_sizes = "4"
gradient_checkpointing = "on"  # off | on | both
train_steps = 1  # GRPO updates per setting; the last is timed (the first also allocates AdamW's state)
logp_chunk_size = 512  # rl.logp_chunk_size
eval_s = 0.0  # seconds of kernel evaluation per step (t_eval of an H200 log) to project step times
master_dtype = "float32"  # with fsdp: the sharded weights' dtype (bfloat16: 8 bytes per parameter, not 16)
fsdp = False  # shard the policy with training.sharding.shard_model (FSDP2, one rank here) before training
fit = False  # the fit table instead: settings that fit fit_gib with vllm_share of it taken by the sampler
fit_models = "1.5b,3b,7b"
fit_gib = 80.0  # an A100 80GB
vllm_share = 0.3  # of fit_gib, allocated first as the sampler's stand-in
fit_length = 4096  # completion tokens per answer in the fit table
fit_micro_batch_sizes = "1,2"
report = ""  # a JSON-lines file of earlier runs: print its tables and exit
device = "cuda" if torch.cuda.is_available() else "cpu"
dtype = "bfloat16"  # training autocast dtype on CUDA
tiny = False  # a CPU miniature: tiny model, 2 x 2 answers of 8-32 tokens
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


def sync_reset(cuda):
    gc.collect()
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def peak(cuda):
    return gib(torch.cuda.max_memory_allocated()) if cuda else None


def build(name, tok):
    """A random-weight Qwen2.5-shaped policy in float32 on the device (sharded when fsdp is on)."""
    from transformers import Qwen2Config, Qwen2ForCausalLM
    torch.manual_seed(seed)
    dims = dict(DIMS[name], vocab_size=max(DIMS[name]["vocab_size"], len(tok)))  # the tiny config's 1000 < BPE's
    cfg = Qwen2Config(max_position_embeddings=32768, bos_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id,
                      pad_token_id=tok.pad_token_id, **dims)
    with torch.device(device):
        model = Qwen2ForCausalLM(cfg).float()
    return model


def emit(row, results):
    print(json.dumps(row), flush=True)
    results.append(row)
    if out:
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        common.append_jsonl(out, row)


def measure_generation(name, model, tok, prompts, lengths, cuda, results):
    """One gen row per engine; returns the answers of the last new engine (None if there was none)."""
    n_params = sum(p.numel() for p in model.parameters())
    samples = None
    for engine in engines.split(","):
        row = dict(kind="gen", model=name, params_m=n_params / 1e6, engine=engine, answers=len(lengths),
                   device=torch.cuda.get_device_name() if cuda else "cpu", torch=torch.__version__)
        copy = sampler.sampler_copy(model, engine)
        sync_reset(cuda)
        warmup_s = None
        if engine == "generate":
            t0 = time.perf_counter()
            rows = list(generate(model, tok, prompts, num_generations, old_tokens, 1.0, 1.0,
                                 batch_size=gen_batch_size, min_new_tokens=old_tokens))  # every answer full length
        else:
            t0 = time.perf_counter()
            sampler.sample(engine, model, copy, tok, prompts, num_generations, max_completion_length, 1.0, 1.0,
                           gen_batch_size, stop_at=[4] * len(lengths))  # compiles (static) at the timed call's
            # shapes: the same prompts and batch (a warm-up of one prompt compiled for batch 1, and the timed call
            # then compiled again inside its window)
            if cuda:
                torch.cuda.synchronize()
            warmup_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            rows = sampler.sample(engine, model, copy, tok, prompts, num_generations, max_completion_length, 1.0,
                                  1.0, gen_batch_size, stop_at=lengths)
        if cuda:
            torch.cuda.synchronize()
        gen_s = time.perf_counter() - t0
        tokens = [len(r["completion_ids"]) for r in rows]
        prompt_tokens = [len(r["prompt_ids"]) for r in rows]
        row.update(gen_s=round(gen_s, 3), gen_tokens=sum(tokens), tokens_mean=sum(tokens) / len(tokens),
                   tokens_max=max(tokens), gen_tokens_per_s=sum(tokens) / gen_s, warmup_s=warmup_s,
                   gen_peak_gib=peak(cuda), prompt_tokens_mean=sum(prompt_tokens) / len(rows),
                   dtype="float32" if copy is None else str(next(copy.parameters()).dtype).replace("torch.", ""))
        emit(row, results)
        if copy is not None:
            samples = rows
        del copy, rows
    return samples


def train_rows(name, model, tok, samples, cuda, results, gen_rows, settings):
    """One train row per (gradient checkpointing, micro_batch_size) in settings."""
    n_params = sum(p.numel() for p in model.parameters())
    adv = torch.randn(len(samples), generator=torch.Generator().manual_seed(seed))
    tokens = sum(len(s["prompt_ids"]) + len(s["completion_ids"]) for s in samples)
    best = max((g for g in gen_rows if g["engine"] != "generate"), key=lambda g: g["gen_tokens_per_s"], default=None)
    old = next((g for g in gen_rows if g["engine"] == "generate"), None)
    completion_tokens = sum(len(s["completion_ids"]) for s in samples)
    if fsdp:
        shard_model(model, mixed_precision=True, master_dtype=getattr(torch, master_dtype))
    for ckpt, mbs in settings:
        if ckpt:
            enable_checkpointing(model)
        else:
            (getattr(model, "activation_checkpointing_disable", None) or model.gradient_checkpointing_disable)()
        model.train()
        rl.micro_batch_size = mbs
        row = dict(kind="train", model=name, params_m=n_params / 1e6, micro_batch_size=mbs, gradient_checkpointing=ckpt,
                   fsdp=fsdp, master_dtype=master_dtype if fsdp else None,
                   device=torch.cuda.get_device_name() if cuda else "cpu", answers=len(samples),
                   train_tokens=tokens, adam_state_gib=gib(8 * n_params),
                   train_steps=train_steps, gen_engine=best and best["engine"],
                   gen_tokens_per_s=best and best["gen_tokens_per_s"], gen_s=best and best["gen_s"],
                   old_gen_tokens_per_s=old and old["gen_tokens_per_s"], gen_peak_gib=best and best["gen_peak_gib"])
        opt = None
        try:
            sync_reset(cuda)
            opt = torch.optim.AdamW(model.parameters(), lr=1e-6, betas=(0.9, 0.99))
            for _ in range(train_steps):
                if cuda:
                    torch.cuda.synchronize()
                t0 = time.perf_counter()
                rl.grpo_update(model, None, opt, samples, adv, tok.pad_token_id, amp(cuda), 1)
                if cuda:
                    torch.cuda.synchronize()
                train_s = time.perf_counter() - t0
            row.update(status="ok", train_s=round(train_s, 3), train_tokens_per_s=tokens / train_s,
                       train_peak_gib=peak(cuda))
            if cuda and best:  # the optimizer state stays resident while the next rollouts are generated
                row["step_peak_gib"] = max(best["gen_peak_gib"] + row["adam_state_gib"], row["train_peak_gib"])
            if best:  # synchronous, and with async_rollouts (generation hides the evaluation or the reverse)
                row["step_s_new"] = best["gen_s"] + eval_s + train_s
                row["step_s_new_async"] = max(best["gen_s"], eval_s) + train_s
            if old:
                row["step_s_old"] = completion_tokens / old["gen_tokens_per_s"] + eval_s + train_s
        except torch.OutOfMemoryError as e:
            row.update(status="oom", error=str(e).splitlines()[0][:200], train_peak_gib=peak(cuda))
        del opt
        model.zero_grad(set_to_none=True)
        row["eval_s"] = eval_s
        emit(row, results)


def amp(cuda):
    return torch.autocast("cuda", dtype=getattr(torch, dtype), enabled=cuda and dtype != "float32")


def random_rows(tok, prompts, lengths, length=None):
    """The prompts' own tokens and completions drawn uniformly from the vocabulary (seeded), of the given lengths."""
    g = torch.Generator().manual_seed(seed)
    ids = [tok(render_prompt(tok, p), add_special_tokens=False)["input_ids"] for p in prompts]
    return [dict(prompt_ids=ids[i // num_generations], truncated=True,
                 completion_ids=torch.randint(len(tok), (length or n,), generator=g).tolist())
            for i, n in enumerate(lengths)]


def fit_table(tok, prompts, cuda, results):
    """--fit: one fit row per (model, gradient checkpointing, micro_batch_size), under the memory cap."""
    if cuda:
        total = torch.cuda.get_device_properties(0).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, fit_gib * 2 ** 30 / total))
    standin = torch.empty(int(vllm_share * fit_gib * 2 ** 30) if cuda else 0, dtype=torch.uint8, device=device)
    ckpts = {"off": [False], "on": [True], "both": [False, True]}[gradient_checkpointing]
    for name in fit_models.split(","):
        for ckpt in ckpts:
            for mbs in (int(b) for b in fit_micro_batch_sizes.split(",")):
                row = dict(kind="fit", model=name, micro_batch_size=mbs, gradient_checkpointing=ckpt, fsdp=fsdp,
                           fit_gib=fit_gib, vllm_share=vllm_share, fit_length=fit_length)
                model = opt = None
                try:
                    sync_reset(cuda)
                    model = build(name, tok)
                    if fsdp:
                        shard_model(model, mixed_precision=True, master_dtype=getattr(torch, master_dtype))
                    if ckpt:
                        enable_checkpointing(model)
                    model.train()
                    rl.micro_batch_size = mbs
                    rows = random_rows(tok, prompts, [fit_length] * mbs)
                    opt = torch.optim.AdamW(model.parameters(), lr=1e-6, betas=(0.9, 0.99))
                    t0 = time.perf_counter()
                    rl.grpo_update(model, None, opt, rows, torch.randn(mbs), tok.pad_token_id, amp(cuda), 1)
                    if cuda:
                        torch.cuda.synchronize()
                    row.update(status="fits", train_s=round(time.perf_counter() - t0, 3), peak_gib=peak(cuda))
                except torch.OutOfMemoryError as e:
                    row.update(status="oom", error=str(e).splitlines()[0][:200], peak_gib=peak(cuda))
                del model, opt
                emit(row, results)
    del standin


def tables(results):
    """The markdown tables of the rows (gen, train, fit) in `results`."""
    f = lambda v, spec: "n/a" if v is None else format(v, spec)
    gens = [r for r in results if r.get("kind") == "gen"]
    trains = [r for r in results if r.get("kind", "train") == "train"]
    fits = [r for r in results if r.get("kind") == "fit"]
    if gens:
        print(f"\nGeneration: {gens[0]['answers']} answers per model on {gens[0]['device']}; generate = the old path "
              f"(float32 weights), measured on answers of {old_tokens} tokens (an upper bound of its speed)\n")
        print("| model | engine | dtype | answers | tokens mean / max | gen tok/s | gen s | warm-up s | peak (GiB) |")
        print("|:---|:---|:---|---:|---:|---:|---:|---:|---:|")
        for r in gens:
            print(f"| {r['model']} | {r['engine']} | {r['dtype']} | {r['answers']} | {r['tokens_mean']:.0f} / "
                  f"{r['tokens_max']} | {r['gen_tokens_per_s']:.0f} | {r['gen_s']:.1f} | {f(r['warmup_s'], '.1f')} | "
                  f"{f(r['gen_peak_gib'], '.1f')} |")
    if trains:
        cpu = trains[0].get("device") == "cpu"
        how = f"under {dtype} autocast" if not cpu and dtype != "float32" else "in float32"
        print(f"\nOne step: training {how} with float32 weights and AdamW; projected step = generation + eval "
              f"{trains[0].get('eval_s', 0):.0f} s + training (old: the old path's tok/s on the same answers)\n")
        print("| model | mbs | grad ckpt | gen tok/s old | gen tok/s new (engine) | train tok/s | train s | peak train "
              "(GiB) | step peak (GiB) | step s old | step s new | async | status |")
        print("|:---|---:|:---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|:---|")
        for r in trains:
            print(f"| {r['model']} | {r['micro_batch_size']} | {'on' if r['gradient_checkpointing'] else 'off'} | "
                  f"{f(r.get('old_gen_tokens_per_s'), '.0f')} | {f(r.get('gen_tokens_per_s'), '.0f')}"
                  f"{' (' + r['gen_engine'] + ')' if r.get('gen_engine') else ''} | "
                  f"{f(r.get('train_tokens_per_s'), '.0f')} | {f(r.get('train_s'), '.1f')} | "
                  f"{f(r.get('train_peak_gib'), '.1f')} | {f(r.get('step_peak_gib'), '.1f')} | "
                  f"{f(r.get('step_s_old'), '.0f')} | {f(r.get('step_s_new'), '.0f')} | "
                  f"{f(r.get('step_s_new_async'), '.0f')} | {r['status']} |")
    if fits:
        print(f"\nFit in {fits[0]['fit_gib']:.0f} GiB with {fits[0]['vllm_share']:.0%} taken by the sampler's "
              f"stand-in: one GRPO step on answers of {fits[0]['fit_length']} tokens\n")
        print("| model | mbs | grad ckpt | fsdp | fits | peak (GiB) | train s |")
        print("|:---|---:|:---:|:---:|:---|---:|---:|")
        for r in fits:
            print(f"| {r['model']} | {r['micro_batch_size']} | {'on' if r['gradient_checkpointing'] else 'off'} | "
                  f"{'on' if r['fsdp'] else 'off'} | {r['status']} | {f(r.get('peak_gib'), '.1f')} | "
                  f"{f(r.get('train_s'), '.1f')} |")


if __name__ == "__main__":
    common.configure(globals())
    if report:
        tables([json.loads(line) for line in open(report) if line.strip()])
        sys.exit(0)
    if tiny:
        models, fit_models, device, num_prompts, num_generations = "tiny", "tiny", "cpu", 2, 2
        max_completion_length, min_completion_length, old_tokens, fit_length = 32, 8, 32, 32
        gen_batch_size, micro_batch_sizes, fit_micro_batch_sizes, train_steps = 4, "1,4", "1", 1
    common.check_device(device)
    cuda = device.startswith("cuda")
    if gradient_checkpointing not in ("off", "on", "both"):
        sys.exit("error: --gradient_checkpointing must be off, on or both")
    for m in (fit_models if fit else models).split(","):
        if m not in DIMS:
            sys.exit(f"error: unknown model {m!r} (known: {', '.join(DIMS)})")
    for e in engines.split(","):
        if e not in sampler.ENGINES:
            sys.exit(f"error: unknown engine {e!r} (known: {', '.join(sampler.ENGINES)})")
    if rollouts not in ("generate", "random"):
        sys.exit("error: --rollouts must be generate or random")
    if fsdp and not torch.distributed.is_initialized():  # FSDP2 over one rank: a process group of one
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29531")
        torch.distributed.init_process_group("nccl" if cuda else "gloo", rank=0, world_size=1)
    t0 = time.perf_counter()
    prompts, tok = prompts_and_tokenizer(num_prompts)
    print(f"prompts and tokenizer ({len(tok)} tokens) in {time.perf_counter() - t0:.1f}s", flush=True)
    # rl.py's settings for grpo_update (module globals there)
    rl.loss_type, rl.num_iterations, rl.beta, rl.temperature, rl.grad_clip = "grpo", 1, 0.0, 1.0, 1.0
    rl.epsilon, rl.epsilon_high, rl.max_completion_length = 0.2, 0.2, max_completion_length
    rl.logp_chunk_size = logp_chunk_size
    results = []
    if fit:
        fit_table(tok, prompts, cuda, results)
    else:
        g = torch.Generator().manual_seed(seed)
        lengths = torch.randint(min_completion_length, max_completion_length + 1, (num_prompts * num_generations,),
                                generator=g).tolist()
        ckpts = {"off": [False], "on": [True], "both": [False, True]}[gradient_checkpointing]
        settings = [(c, int(b)) for c in ckpts for b in micro_batch_sizes.split(",")]
        for name in models.split(","):
            model = build(name, tok)
            print(f"{name}: {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M params; {len(lengths)} answers of "
                  f"{sum(lengths) / len(lengths):.0f} tokens on average (max {max(lengths)})", flush=True)
            gen_start = len(results)
            samples = measure_generation(name, model, tok, prompts, lengths, cuda, results) \
                if rollouts == "generate" else None
            if samples is None:
                samples = random_rows(tok, prompts, lengths)
            train_rows(name, model, tok, samples, cuda, results, results[gen_start:], settings)
            del model, samples
            sync_reset(cuda)
    tables(results)
