"""
Stage 3 of CUDA-L1: contrastive reinforcement learning with GRPO (REFERENCE.md §1.3 and §5), in plain PyTorch.

    python rl.py --gpu=a100          # a real run: Qwen2.5-Coder-1.5B-Instruct on the KernelBench train split
    python rl.py --preset=demo       # prepare -> sft -> rl -> evaluate with a tiny model, on a GPU or the CPU
    torchrun --nproc_per_node=8 rl.py --gpu=a100   # 8 GPUs: num_prompts rounded up to a multiple of 8, split over them

One step of the loop at the end of this file (its comments carry the same numbers):
 1. prompts: num_prompts tasks, each shown num_exemplars kernels of its exemplar database (bucket sampling);
 2. sample: num_generations answers per prompt;
 3. evaluate: the code of each answer's "## Code Implementation" section; each distinct kernel once, with bench.py;
 4. rewards: speedup (x) of a correct kernel, failure_reward for anything else; normalise, clip, group advantages;
 5. update: num_iterations optimizer steps of the GRPO loss on the batch (grpo_update);
 6. database: every new correct kernel joins its task's exemplars, so later prompts show better ones; log, save.

Departures from TRL's GRPO and from the paper, one line each:
 - rewards are normalised and clipped to +-reward_clip as the paper does, before the group advantage (TRL has none);
 - the paper does not say over which set it normalises: reward_norm picks the batch (default) or each group;
 - a kernel (same task, same source) is measured once per run and its result reused (reward = a kernel property);
 - the reward is one measurement's speedup, unrounded: no median of 7 bucket means rounded toward 1 (§1.3);
 - no LLM judge for reward hacks: bench.py's checks flag them, they earn failure_reward and go to hacks.jsonl;
 - async_rollouts=True samples step k+1 while step k's kernels compile: one update stale (training/rollouts.py);
 - torchrun: ranks evaluate their own prompts, rewards are normalised over all, gradients summed (training/ddp.py);
 - the paper's group size, learning rate, beta, epsilon, bucket width and temperature are unpublished: ours.
Outputs in out_dir/rl: log.jsonl (a line per step), samples.jsonl, hacks.jsonl (once a hack is found), db.json,
cache.json, curves.png, ckpt/ (the policy and state.pt: --resume=True continues exactly). Only rank 0 writes them.
"""
import concurrent.futures
import contextlib
import math
import os
import random
import sys
import time

import torch

import common
import prompting
from training import checkpoint, ddp, rl_log, sampler, sharding, stages
from training.exemplars import add_kernels, kernel_key, load_database, sample_exemplars
from training.generation import load_vllm, vllm_generate, vllm_push_weights, vllm_sleep
from training.models import completion_logp, enable_checkpointing, load_model, resolve_model
from training.rollouts import (behaviour_logp, evaluate_kernels, prebuild_kernels, rank_gpu,
                               record_behaviour_logp)

# -----------------------------------------------------------------------------
# config
policy = ""  # HF name or folder; "" = out_dir/sft when it exists, else default_model
default_model = "Qwen/Qwen2.5-Coder-1.5B-Instruct"  # the policy when there is neither --policy nor out_dir/sft
out_dir = "out"  # reads tasks.jsonl, db.json, seed.jsonl from here; writes out_dir/rl
split = "train"  # which tasks of tasks.jsonl to train on: train | eval | all
train_degenerate = False  # also train on tasks prepare.py's screen found degenerate (REFERENCE.md §3)
gpu = "a100"  # --gpu=NAME sets device, arch, gpu_name and batch sizes from common.GPU_PRESETS
device = "cuda"  # where the policy trains and the kernels run: cuda | cpu
arch = "8.0"  # TORCH_CUDA_ARCH_LIST for nvcc
gpu_name = "NVIDIA A100"  # the GPU the prompt names ("CPU": the prompt of the CPU task)
# GRPO (TRL names, REFERENCE.md §5)
num_prompts = 4  # prompts (tasks) per step, over all ranks; torchrun rounds it up to a multiple of the ranks
num_generations = 8  # G, answers per prompt
max_completion_length = 4096  # longest answer, in tokens
temperature = 1.0  # sampling temperature (the log-probs of the loss use it too)
top_p = 1.0  # nucleus sampling; 1 = off
beta = 0.0  # k3 KL weight to the frozen initial model; 0 loads no reference model
epsilon = 0.2  # ratio clip 1 - epsilon; acts only with num_iterations > 1 or async_rollouts (else the ratio is 1)
epsilon_high = 0.2  # upper clip: 1 + epsilon_high (DAPO's clip-higher when larger than epsilon)
num_iterations = 1  # optimizer passes per generated batch; at 1 (synchronous) the ratio is 1 and epsilon is idle
loss_type = "grpo"  # grpo | bnpo | dr_grpo | dapo
scale_rewards = "group"  # group | batch | none: the std dividing the advantage; "group" undoes reward_norm's scaling
mask_truncated_completions = True  # no loss on answers cut at max_completion_length
# reward (CUDA-L1 §3)
reward_shape = "speedup"  # speedup | log_speedup (log x < 0 for a slower kernel: needs failure_reward below it)
failure_reward = 0.0  # a failed answer's reward; below any correct kernel's: 0 for speedup, e.g. -3 for log_speedup
reward_clip = 1.5  # clip the normalised rewards to +-reward_clip; 0: no clip
reward_norm = "batch"  # batch | group | none (raw); with scale_rewards="group" batch and group differ only by the clip
# exemplars (CUDA-L1 §3: bucket sampling)
num_exemplars = 2  # kernels with their speedups in each prompt; SFT data and evaluate.py's prompts show 2
exemplar_sampling = "bucket"  # bucket | random
delta_s = 0.25  # bucket width, in x of speedup
tau = 1.0  # softmax temperature over centred bucket means
# optimisation
lr = 1e-6  # AdamW learning rate
weight_decay = 0.0  # AdamW weight decay
grad_clip = 1.0  # gradient norm clip
micro_batch_size = 1  # answers per forward/backward pass
logp_chunk_size = 512  # tokens per chunk of the log-prob head (B x chunk x vocab fp32); 0 = all (no saving)
gradient_checkpointing = False  # recompute activations in backward: less memory, more time (scripts/rl_scale.py)
async_rollouts = False  # generate step k+1's rollouts while step k's kernels compile (training/rollouts.py)
gen_batch_size = 32  # completions per transformers generate() call
rollout_engine = "auto"  # auto (static on CUDA, else generate) | generate (training weights) | static | continuous
importance_sampling_cap = 2.0  # TIS for a sampling copy (static, continuous, vLLM): token loss x min(exp(old_logp -
                               # sampler_logp), cap), as TRL; 0 = off; idle with generate (the trainer samples)
use_vllm = False  # sample with a colocated vLLM engine (TRL colocate mode); not yet run on this project's GPU machine
vllm_gpu_memory_utilization = 0.3  # the GPU memory share vLLM may take; training needs the rest
vllm_max_model_len = 0  # prompt + completion tokens vLLM reserves KV cache for; 0 = the model's maximum
vllm_max_num_batched_tokens = 4096  # tokens per vLLM engine step (prefill chunks and decodes), as TRL's colocate mode
dtype = "bfloat16"  # autocast dtype on CUDA; weights and optimizer stay in float32
fsdp = False  # shard weights, gradients and AdamW state over the ranks (FSDP2, training/sharding.py), not replicate
max_steps = 200  # GRPO steps
save_interval = 10  # checkpoint every this many steps (and at the end and on Ctrl-C)
seed = 1337  # task order, exemplar draws and sampling
resume = False  # continue out_dir/rl/ckpt (and an interrupted chain), not refuse a run
result_cache = ""  # {key: bench result} JSON of an earlier run on this GPU (rl/cache.json)
# evaluation of kernels (bench.py)
num_correct_trials = 5  # correctness trials per kernel, each on fresh inputs
time_budget_s = 2.0  # seconds the timed calls of one kernel should take
timeout_s = 300.0  # per kernel: build, checks and timing, s
build_workers = 0  # parallel builds; 0 = one per CPU core
# chaining (the presets): prepare.py and sft.py run before RL, evaluate.py after, each with its settings from this line
kernelbench_dir = ""  # "" = $KERNELBENCH_DIR or shared/kernelbench beside the checkout
download = False  # prepare.py fetches KernelBench from GitHub when kernelbench_dir does not exist
prepare_if_missing = False  # run prepare.py and sft.py first where their outputs are missing or unfinished
run_evaluate = False  # run evaluate.py after RL: the SFT model and the RL model side by side
# -----------------------------------------------------------------------------
CHOICES = dict(loss_type=("grpo", "bnpo", "dr_grpo", "dapo"), scale_rewards=("group", "batch", "none"),
               reward_norm=("batch", "group", "none"), reward_shape=("speedup", "log_speedup"),
               exemplar_sampling=("bucket", "random"), split=("train", "eval", "all"), rollout_engine=sampler.ENGINES)


def normalise_rewards(rewards, clip, over="batch", group_size=1):
    """CUDA-L1 §3: (r - mean) / std (population std), clipped to [-clip, clip] (0: no clip). rewards: (N,), grouped
    by prompt in runs of group_size. over="batch": one mean and std for the batch; "group": per prompt's group, so a
    task whose samples all run 4.5-5.5x next to failing tasks keeps its order instead of clipping to clip everywhere;
    "none": the rewards as they are. A group of equal rewards gives 0. Raises ValueError for another `over`."""
    if over not in ("batch", "group", "none"):
        raise ValueError(f"unknown reward_norm {over!r}: batch | group | none")
    if over == "none":
        return rewards
    x = rewards.view(-1, group_size) if over == "group" else rewards.view(1, -1)  # (groups, G) or (1, N)
    z = (x - x.mean(dim=1, keepdim=True)) / (x.std(dim=1, unbiased=False, keepdim=True) + 1e-8)
    return (z.clamp(-clip, clip) if clip > 0 else z).reshape(-1)


def group_advantages(rewards, group_size, scale="group"):
    """GRPO advantages, (N,) from rewards (N,) grouped by prompt: A_i = r_i - mean of its group, divided by the
    group std + 1e-4 (scale="group"), the batch std + 1e-4 ("batch") or not at all ("none", Dr. GRPO); std with
    Bessel's correction, as TRL. Equal rewards give 0, and so does group_size 1 (the std of one value is NaN)."""
    if group_size == 1:
        return torch.zeros_like(rewards)
    groups = rewards.view(-1, group_size)  # (num_prompts, G)
    adv = groups - groups.mean(dim=1, keepdim=True)
    if scale == "group":
        adv = adv / (groups.std(dim=1, keepdim=True) + 1e-4)
    elif scale == "batch":
        adv = adv / (rewards.std() + 1e-4)
    else:
        assert scale == "none", f"unknown scale_rewards {scale!r}"
    return adv.reshape(-1)


def grpo_loss(logp, old_logp, advantages, mask, ref_logp=None, beta=0.0, epsilon=0.2, epsilon_high=None,
              loss_type="grpo", max_completion_length=None, num_sequences=None, num_tokens=None, sampler_logp=None,
              is_cap=2.0):
    """The clipped-ratio GRPO loss (REFERENCE.md §5). logp, old_logp, ref_logp, mask: (B, T); advantages: (B,).
    Per token: -min(ratio * A, clip(ratio, 1 - epsilon, 1 + epsilon_high) * A) + beta * k3 KL to ref_logp.
    Reduction: grpo = token mean per sequence, then / sequences; bnpo = token mean of this batch; dr_grpo = sum /
    (num_sequences * max_completion_length); dapo = sum / num_tokens. num_sequences / num_tokens: the whole batch's
    totals when this call sees one micro-batch. sampler_logp (B, T): another engine's, TIS (sampler.truncated_is_weight)
    Returns (loss, {kl, clip_frac, logp_gap, is_capped}); ValueError for another loss_type."""
    eps_high = epsilon if epsilon_high is None else epsilon_high
    m = mask.float()
    adv = advantages[:, None]  # (B, 1)
    # with old_logp = logp.detach() (num_iterations=1, synchronous rollouts) the ratio is exactly 1: the clip never
    # acts and the gradient is A * grad logp; it departs from 1 only on a later pass or for a stale (async) batch
    ratio = torch.exp(logp - old_logp)  # (B, T)
    per_token = -torch.min(ratio * adv, torch.clamp(ratio, 1 - epsilon, 1 + eps_high) * adv)
    is_weight, tis = sampler.truncated_is_weight(old_logp, sampler_logp, m, is_cap)  # 1 without sampler_logp
    per_token = per_token * is_weight  # before the KL term, as TRL
    kl = torch.zeros_like(logp)
    if beta != 0.0:
        diff = ref_logp - logp
        kl = torch.exp(diff) - diff - 1  # k3 estimator: >= 0, 0 where logp == ref_logp
        per_token = per_token + beta * kl
    num_seq = num_sequences or logp.shape[0]
    if loss_type == "grpo":
        loss = ((per_token * m).sum(1) / m.sum(1).clamp(min=1.0)).sum() / num_seq
    elif loss_type == "bnpo":
        loss = (per_token * m).sum() / m.sum().clamp(min=1.0)
    elif loss_type == "dr_grpo":
        assert max_completion_length, "dr_grpo needs max_completion_length"
        loss = (per_token * m).sum() / (num_seq * max_completion_length)
    elif loss_type == "dapo":
        loss = (per_token * m).sum() / max(float(num_tokens or m.sum().item()), 1.0)
    else:
        raise ValueError(f"unknown loss_type {loss_type!r}")
    clipped = ((ratio < 1 - epsilon) & (adv < 0)) | ((ratio > 1 + eps_high) & (adv > 0))
    n = m.sum().clamp(min=1.0)
    return loss, dict(kl=((kl * m).sum() / n).item(), clip_frac=((clipped.float() * m).sum() / n).item(), **tis)


def grpo_update(model, ref_model, opt, rows, row_adv, pad_id, amp=contextlib.nullcontext(), world=1, num_masked=0):
    """Step 5: num_iterations optimizer steps of grpo_loss on this rank's rows (dicts with prompt_ids and
    completion_ids), row_adv: (len(rows),); hyperparameters are this module's config. num_masked: this rank's
    truncated completions left out: as in TRL they still count in the sequences grpo and dr_grpo divide by. Under
    torchrun the loss is divided by the totals of all ranks and the gradients summed (ddp.ddp_all_reduce_grads): the
    update one process makes on the whole batch (bnpo's per-micro-batch means depend on where batches are cut).
    old_logp is a row's recorded behaviour log-prob (async_rollouts), else the model's own before the first pass.
    Returns (stats, n_rows): this rank's share of {loss, kl, clip_frac, entropy} and grad_norm, the gradient norm
    before the clip of the last pass (all ranks' gradients: the same on each; absent when no rank had rows to train
    on); completions trained on, all ranks."""
    chunks = [list(range(i, min(i + micro_batch_size, len(rows)))) for i in range(0, len(rows), micro_batch_size)]
    n_rows, n_tokens, n_chunks, n_seq = map(sum, zip(*ddp.ddp_gather(
        (len(rows), sum(len(s["completion_ids"]) for s in rows), len(chunks), len(rows) + num_masked))))
    old, ref = {}, {}
    dev = next(model.parameters()).device
    logp_of = lambda net, c: completion_logp(net, [rows[i] for i in c], pad_id, temperature, logp_chunk_size)
    with torch.no_grad(), amp:  # (under FSDP every rank runs the policy equally often: sharding.even_passes)
        for c in sharding.even_passes(model, chunks, num_iterations > 1 and behaviour_logp(rows) is None):
            recorded = behaviour_logp([rows[i] for i in c], dev)
            if recorded is not None:
                old[c[0]] = recorded
            elif num_iterations > 1:  # later passes compare with the weights before the first
                old[c[0]] = logp_of(model, c)[0]
            if ref_model is not None:
                ref[c[0]] = logp_of(ref_model, c)[0]
    stats = dict(kl=0.0, clip_frac=0.0, entropy=0.0, loss=0.0, logp_gap=0.0, is_capped=0.0)
    for _ in range(num_iterations if n_rows else 0):
        for c in sharding.even_passes(model, chunks):
            with amp:
                logp, entropy, mask = logp_of(model, c)
                loss, sts = grpo_loss(logp, old.get(c[0], logp.detach()), row_adv[c].to(logp.device), mask,
                                      ref_logp=ref.get(c[0]), beta=beta, epsilon=epsilon, epsilon_high=epsilon_high,
                                      loss_type=loss_type, max_completion_length=max_completion_length,
                                      num_sequences=n_seq, num_tokens=n_tokens, is_cap=importance_sampling_cap,
                                      sampler_logp=behaviour_logp([rows[i] for i in c], dev, "sampler_logp"))
                if loss_type == "bnpo":  # a per-micro-batch token mean (as TRL): the mean over all micro-batches
                    loss = loss / n_chunks
            loss.backward()
            weight = len(c) / n_rows / num_iterations
            stats["loss"] += loss.item() / num_iterations
            for key, value in sts.items():  # kl, clip_frac, logp_gap, is_capped
                stats[key] += value * weight
            stats["entropy"] += ((entropy * mask).sum() / mask.sum().clamp(min=1)).item() * weight
        sharding.reduce_grads(model)
        stats["grad_norm"] = torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip).item()  # before the clip
        opt.step()
        opt.zero_grad(set_to_none=True)
    return stats, n_rows


if __name__ == "__main__":
    from harness.batch import cpu_count
    common.exit_on_interrupt("continue with the same command and --resume=True")
    common.configure(globals(), passes_on=stages.chained)
    for key, allowed in CHOICES.items():
        if globals()[key] not in allowed:
            sys.exit(f"error: --{key}={globals()[key]!r}; choose one of {', '.join(allowed)}")
    if policy:  # a mistyped model folder is named before the device (the default cuda fails on a CPU machine)
        try:
            resolve_model(policy, paths_only=True)
        except RuntimeError as e:
            sys.exit(f"error: {e}")
    common.check_device(device)
    rollout_engine = sampler.pick_engine(rollout_engine, device)  # training/sampler.py: which engine is fast where
    argv = sys.argv[1:]
    rank, world, local_rank, device = ddp.ddp_setup(device)
    master = rank == 0  # only rank 0 writes files
    num_prompts, prompts_per_rank = ddp.split_prompts(num_prompts, world, say=master)
    if master and num_exemplars != prompting.NUM_EXEMPLARS:
        print(f"warning: --num_exemplars={num_exemplars}, but prepare.py's SFT prompts and evaluate.py's contrastive "
              f"prompt show {prompting.NUM_EXEMPLARS}: RL trains on a prompt shape the policy was neither fine-tuned "
              "nor is evaluated on", flush=True)
    if master and reward_shape == "log_speedup" and failure_reward >= 0:
        print(f"warning: reward_shape=log_speedup with failure_reward={failure_reward}: a failure then earns more "
              "than any correct kernel slower than the reference (log x < 0); give e.g. --failure_reward=-3",
              flush=True)
    rl_dir, ckpt_dir = os.path.join(out_dir, "rl"), os.path.join(out_dir, "rl", "ckpt")
    # the earlier stages, when the preset chains them: rank 0 runs them, the other ranks wait at the barrier
    if master and prepare_if_missing:
        stages.run_earlier(argv, out_dir, resume, policy)
    ddp.ddp_barrier()
    t_rl = time.time()
    if not resume:
        checkpoint.refuse_existing_run(rl_dir, out_dir, max_steps)
    os.makedirs(rl_dir, exist_ok=True)
    rng = random.Random(seed)  # shared by all ranks: which tasks each step trains on
    rank_rng = random.Random(seed + 1 + rank)  # this rank's exemplar draws
    torch.manual_seed(seed + rank)  # this rank's sampling
    tasks, train_tasks = stages.load_tasks(out_dir, split, train_degenerate, master)
    try:
        database, cache = load_database(out_dir, list(tasks))
        if result_cache:  # measurements of an earlier run on the same GPU (same task + same source = same kernel)
            cache.update(common.read_json(result_cache))
    except (ValueError, OSError) as e:
        sys.exit(f"error: {e}")
    best_seed = {n: max([e["speedup"] for e in database[n]], default=0.0) or 1.0 for n in tasks}

    state_path = os.path.join(ckpt_dir, "state.pt")
    resuming = resume and os.path.exists(state_path)
    saved = torch.load(state_path, weights_only=False) if resuming else {}
    if resume and not resuming:
        print(f"--resume: no checkpoint in {ckpt_dir}, starting at step 0")
    init_src = saved.get("init_src") or policy or (os.path.join(out_dir, "sft") if os.path.exists(
        os.path.join(out_dir, "sft", "config.json")) else default_model)
    try:
        model, tok = load_model(ckpt_dir if resuming else init_src, device=device)
        # the KL anchor is the model RL started from, also after a resume (not the checkpoint)
        ref_model = load_model(init_src, device=device)[0].eval().requires_grad_(False) if beta else None
    except RuntimeError as e:
        sys.exit(f"error: {e}")
    model.train()
    if gradient_checkpointing:
        enable_checkpointing(model)
    if fsdp:
        sharding.shard_model(model, mixed_precision=dtype != "float32")
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay, betas=(0.9, 0.99))
    step, history, pending = 0, [], None  # pending: the next step's batch, generated ahead (async_rollouts)
    if resuming:
        sharding.load_optimizer_state(model, opt, saved["opt"])
        step, history, database, cache = saved["step"], saved["history"], saved["db"], {**cache, **saved["cache"]}
        rng.setstate(saved["rng"])
        pending = checkpoint.restore_rngs(saved, rank, world, rank_rng, device, seed)
        print(f"resumed from {ckpt_dir} at step {step}"
              + (f" (all {max_steps} steps done: no more training, the report again)" if step >= max_steps else ""))
    llm = None
    if use_vllm:
        try:
            llm = load_vllm(ckpt_dir if resuming else init_src, vllm_gpu_memory_utilization, seed=seed + rank,
                            dtype=dtype if device.startswith("cuda") else "float32",
                            max_model_len=vllm_max_model_len or None,
                            max_num_batched_tokens=vllm_max_num_batched_tokens, sleep_mode=True)
        except RuntimeError as e:
            sys.exit(f"error: {e}")
    sampler_model = sampler.sampler_copy(model, rollout_engine, dtype) if llm is None else None
    amp = torch.autocast("cuda", dtype=getattr(torch, dtype), enabled=device.startswith("cuda") and dtype != "float32")
    if master:
        print(f"policy {ckpt_dir if resuming else init_src}: {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M "
              f"params; {len(train_tasks)} tasks; {num_prompts}x{num_generations} samples per step on {world} rank(s); "
              f"rollouts by {'vLLM' if llm else 'transformers ' + rollout_engine}")

    def rollouts():
        """Steps 1-2: this step's prompts (the same task list on every rank from the shared rng, this rank's slice)
        and num_generations samples of each, every sample with its task; with async_rollouts also old_logp."""
        names = rng.sample(train_tasks, min(num_prompts, len(train_tasks)))
        names += rng.choices(train_tasks, k=num_prompts - len(names))  # fewer tasks than prompts: repeat
        names = names[rank * prompts_per_rank:(rank + 1) * prompts_per_rank]
        prompts = []
        for name in names:  # 1. prompts
            shown = sample_exemplars(database[name], num_exemplars, rank_rng, exemplar_sampling, delta_s, tau)
            prompts.append(prompting.contrastive_prompt(tasks[name]["src"],
                                                        [(e["code"], e["speedup"]) for e in shown], gpu_name))
        if llm is not None:  # 2. sample
            out = vllm_generate(llm, tok, prompts, num_generations, max_completion_length, temperature, top_p)
            vllm_sleep(llm)  # its GPU memory free for kernel timing and training; vllm_push_weights wakes it
        else:
            out = sampler.sample(rollout_engine, model, sampler_model, tok, prompts, num_generations,
                                 max_completion_length, temperature, top_p, gen_batch_size,
                                 synced_gpus=fsdp and world > 1)
        for i, sample in enumerate(out):
            sample["task"] = names[i // num_generations]
        if async_rollouts:
            record_behaviour_logp(model, out, tok.pad_token_id, temperature, micro_batch_size, logp_chunk_size, amp)
        return out

    workers = build_workers or max(1, cpu_count() // world)
    gpu_scope = lambda: rank_gpu(local_rank, world, device)  # bench's children see this rank's GPU only
    bench_device = device.split(":")[0]
    build_thread = concurrent.futures.ThreadPoolExecutor(1)  # async_rollouts: compiles next to generation
    # Ctrl-C or SIGTERM (torchrun's on Ctrl-C): finish the step, save, exit with 130; a second Ctrl-C stops at once
    stop, restore_signals = stages.finish_step_on_interrupt(lambda: (
        f"rl.py interrupted during RL step {step} (stage 3 of 4 when chained): finishing the step, then saving a "
        "checkpoint (Ctrl-C again: quit without)"), master)
    try:
        while step < max_steps:
            t0 = time.time()
            # 1-2. prompts and samples; with async_rollouts this batch was generated while the previous step's
            # kernels compiled, by the weights before the previous update (staleness 1: training/rollouts.py)
            staleness = 0 if pending is None else 1
            samples = pending if pending is not None else rollouts()
            pending = None
            t1 = time.time()
            # 3. evaluate each distinct new kernel, once over all ranks (the lowest rank that drew it)
            todo = {}
            for s in samples:
                s["code"], s["format_error"] = prompting.extract_code(s["text"])
                if s["code"] is not None:
                    s["key"] = kernel_key(s["task"], s["code"])
                    if s["key"] not in cache:
                        todo[s["key"]] = (s["task"], tasks[s["task"]]["src"], s["code"])
            claimed = set().union(*ddp.ddp_gather(set(todo))[:rank])  # a collective: every rank calls it
            mine = {k: v for k, v in todo.items() if k not in claimed}
            if async_rollouts:  # the next step's batch from the current weights while this one's kernels compile
                build = build_thread.submit(prebuild_kernels, mine, gpu_scope, bench_device, arch or None, timeout_s,
                                            workers)
                pending = rollouts()  # (also at the last step: it is saved, so --resume continues exactly)
            t_next, t_build = time.time() - t1, build.result() if async_rollouts else 0.0
            t_eval_start = time.time()
            results = evaluate_kernels(mine, gpu_scope, device=bench_device, arch=arch or None,
                                       num_correct_trials=num_correct_trials, time_budget_s=time_budget_s,
                                       timeout_s=timeout_s, build_workers=workers)
            t_eval = t_build + time.time() - t_eval_start
            for part in ddp.ddp_gather(results):
                cache.update(part)
            t2 = time.time()
            # 4. rewards, normalised over the whole batch (all ranks) or per group; then group advantages
            for s in samples:
                res = cache.get(s.get("key"))
                s["status"] = "format_error" if res is None else res["status"]
                s["speedup"] = res["speedup"] if res is not None and res["status"] == "ok" else None
                if s["speedup"] is None:
                    s["reward"] = failure_reward
                else:
                    s["reward"] = s["speedup"] if reward_shape == "speedup" else math.log(s["speedup"])
                s["hack_kind"] = res.get("hack") if res is not None and res["status"] == "hack" else None
            n_local = len(samples)
            mine_slice = slice(rank * n_local, (rank + 1) * n_local)  # groups never span ranks
            rewards = torch.tensor(sum(ddp.ddp_gather([s["reward"] for s in samples]), []), dtype=torch.float32)
            rewards_norm = normalise_rewards(rewards, reward_clip, reward_norm, num_generations)
            advantages = group_advantages(rewards_norm, num_generations, scale_rewards)[mine_slice]
            rewards_norm = rewards_norm[mine_slice]
            # 5. GRPO update; each rank's loss is divided by the totals of the whole batch, gradients summed
            keep = [i for i, s in enumerate(samples) if not (mask_truncated_completions and s["truncated"])]
            stats, n_rows = grpo_update(model, ref_model, opt, [samples[i] for i in keep],
                                        advantages[keep] if keep else torch.zeros(0), tok.pad_token_id, amp, world,
                                        num_masked=len(samples) - len(keep))
            if llm is not None and n_rows:
                vllm_push_weights(llm, model)  # the next rollouts sample from the updated policy
            sampler.refresh_sampler(sampler_model, model)  # the same for the bf16 copy (None: nothing to do)
            t3 = time.time()
            # 6. the exemplar database grows with every new correct kernel of every rank, in rank order
            found = [dict(task=s["task"], code=s["code"], speedup=s["speedup"]) for s in samples
                     if s["speedup"] is not None]
            for part in ddp.ddp_gather(found):
                add_kernels(database, part, step)
            # log (rank 0): one line per step over the samples of all ranks, every sample in samples.jsonl
            recs = rl_log.sample_records(step, rank, samples, rewards_norm, advantages, cache, mine)
            t_gen = (t1 - t0) + (t_next if async_rollouts else 0.0)  # generating in this step (async: the next batch)
            gathered = ddp.ddp_gather(dict(recs=recs, stats=stats, t=(t_gen, t_eval, t3 - t2), new=len(mine),
                                           psum=ddp.param_checksum(model) if world > 1 else None,
                                           gen_tokens=rl_log.generated_tokens(samples, pending, staleness),
                                           peak_gib=rl_log.peak_memory_gib(device)))
            step += 1
            if master:
                history.append(rl_log.log_step(rl_dir, step - 1, gathered, best_seed, staleness, t0))
            halt = any(ddp.ddp_gather(bool(stop)))  # every rank stops at the same step
            if step % save_interval == 0 or step == max_steps or halt:
                rank_rngs = ddp.ddp_gather(checkpoint.rng_state(rank_rng, device, pending))
                weights, opt_state = sharding.full_state_dicts(model, opt)  # under FSDP gathered by every rank
                if master:
                    checkpoint.save(ckpt_dir, rl_dir, model, tok, dict(
                        opt=opt_state, step=step, history=history, db=database, cache=cache, rng=rng.getstate(),
                        rank_rng=rank_rngs, init_src=init_src, config=common.config_keys(globals())), history, weights)
            if halt:
                if master:
                    print(f"saved a checkpoint after RL step {step - 1} ({step} of {max_steps} steps done) in "
                          f"{ckpt_dir}; continue with: {checkpoint.resume_command(world)}", flush=True)
                sys.exit(130)
    except KeyboardInterrupt:
        print(f"rank {rank}: stopped at once, no checkpoint written; --resume=True continues from the last one")
        sys.exit(130)
    restore_signals()  # RL is over: an interrupt from here on is no step's
    if master and history:
        print(rl_log.final_line(history))
    del llm
    ddp.ddp_cleanup()
    stages.STAGE_S["rl.py"] = time.time() - t_rl
    if master and run_evaluate:  # the model before RL and after, on the same prompts
        stages.run_stage("evaluate.py", argv, out_dir, resume, [f"--model=before_rl={init_src},after_rl={ckpt_dir}"])
    if master:
        stages.print_wall_time()
