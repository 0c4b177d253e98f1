"""
Stage 3 of CUDA-L1: contrastive reinforcement learning with GRPO, in plain PyTorch.

    python rl.py --gpu a100          # a real run: Qwen2.5-Coder-1.5B-Instruct on the KernelBench train split
    python rl.py --preset=demo       # prepare -> sft -> rl -> evaluate with a tiny model: tiny (GPU) or tiny_cpu
    torchrun --nproc_per_node=2 rl.py --preset=tiny   # data parallel: num_prompts split over the GPUs

One step, read top to bottom in the loop at the end of this file:
 1. pick num_prompts training tasks; for each, draw num_exemplars kernels from the task's exemplar database by
    bucket sampling and write the contrastive prompt (prompting.contrastive_prompt; REFERENCE.md §1.3);
 2. sample num_generations answers per prompt;
 3. take the code from each answer's "## Code Implementation" section and evaluate every distinct kernel with
    bench.py (built in parallel, timed one at a time, each in its own process);
 4. reward = measured speedup for a correct kernel, failure_reward for anything else (format error, compile
    error, crash, wrong output, a flagged hack); normalise and clip to [-reward_clip, reward_clip] as the paper
    does, over the whole batch (reward_norm="batch") or within each prompt's group ("group"), then group-normalised
    advantages as in GRPO. With scale_rewards="group" the two differ only through the clip (standardising a group
    undoes any affine map of its rewards). The paper does not say which set. Default "batch": on the H200 both
    learned alike (scripts/ablate_reward_norm.sh -> results/tiny/h200/ablate_reward_norm: per sampled kernel 1.06 ->
    1.86x batch, 1.06 -> 1.84x group); on CPU (3 seeds) group ended nearer each task's best kernel (0.86-0.94 vs
    0.65-0.89), a hint, not a verdict. The README's demo figures use batch. Try "group" where tasks' speedups
    differ widely;
 5. one GRPO update per generated batch (num_iterations of them), log-probs recomputed by the training model;
 6. every correct kernel goes into the task's exemplar database, so later prompts show better exemplars.

How this departs from GRPO as TRL implements it, and from the paper:
 - rewards go through the paper's normalise-and-clip before the group advantage (TRL has no such step; its
   scale_rewards, kept here with the same meaning, only picks the std that divides the advantage);
 - an identical kernel (same task, same source) is measured once per run and its result reused: the reward is a
   property of the kernel, and re-timing every duplicate sample would make the loop evaluation-bound;
 - no LLM judge for hacks (the paper's DeepSeek-R1 judge): bench.py's checks flag hacks, which earn the failure
   reward and are logged to hacks.jsonl;
 - the paper's group size, learning rate, beta, epsilon, bucket width and temperature were not published;
   the defaults here are ours.

Rollouts that overlap evaluation (async_rollouts=True; TRL's async GRPO; issue 13 item 6). While bench.py compiles
step k's new kernels (bench.build in child processes on CPU cores, driven from a thread), the main thread already
generates step k+1's batch with the current weights theta_k; the kernels are timed (bench.evaluate_many, builds now
cached) only once the generation is done, so no timing shares the GPU with the policy (bench times one kernel per
GPU at a time for the same reason). Compiles are most of an evaluation (REFERENCE.md §2: 50-60 s per load_inline
build). Step k's update then changes theta_k: the batch trained on at step k+1 was sampled by theta_k and is
trained on at theta_k+1, one update stale (rollout_staleness = 1 in the log). The
correction is PPO's importance ratio to the behaviour policy: right after generating, a no-grad forward of the
generating weights records every token's log-prob (old_logp, through the same completion_logp as training), and the
loss uses ratio = exp(logp - old_logp), logp = the training model's log-prob at update time, clipped to
[1 - epsilon, 1 + epsilon_high] inside min(ratio * A, clip(ratio) * A): a token whose ratio has already left the
band in the direction its advantage pushes gives no gradient (grpo_loss; clip_frac in the log counts them). With
num_iterations > 1 the recorded old_logp serves every pass. The k3 KL term is taken on the stale tokens without an
importance weight, as TRL does, so its logged value is not the on-policy estimate. The prompts of step k+1 are
written before step k's kernels enter the database (exemplars lag one step). Every step, the last too, generates the
next batch, which the checkpoint keeps, so --resume continues exactly. Default: synchronous. On the H200 (tiny
preset, results/tiny/h200/ablate_async_rollouts{,_s11}) sync and async learned alike (1.06/0.85 -> 1.86/1.86x, 0.91/0.88
-> 1.75/1.62x) with 0.5-1.4 s of generation a step to hide; at 1.5B (258 s of it) scripts/rl_scale.py projects 353 s
a step sync, 267 s async, with 86 s of evaluation (results/bench/2026-12-02_s11/call2_rl_scale_1.5b.log).

Many GPUs (torchrun, issue 4): every rank holds the whole model, generates and evaluates num_prompts / world_size
prompts on its own GPU, and gradients are summed over the ranks (the loss is divided by the totals of the whole
batch, so the update is the one a single GPU would make on the full batch). Tasks per step come from an RNG shared
by all ranks; exemplars and sampling from per-rank RNGs. Rewards are normalised over the full batch; the result
cache and the exemplar database are merged across ranks every step (all_gather_object), a kernel drawn on two ranks
is evaluated once. Only rank 0 writes logs and checkpoints. prepare.py / sft.py / evaluate.py, when chained by
the presets, run on rank 0 alone while the others wait.
"""
import concurrent.futures
import contextlib
import math
import os
import random
import shlex
import signal
import sys
import time

import torch

import common
import prompting
from training import stages
from training.rl_log import format_line, plot, step_summary
from training.stages import sha

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
gpu_name = "NVIDIA A100"  # the GPU the prompt names
# GRPO (TRL names, REFERENCE.md §5)
num_prompts = 4  # prompts (tasks) per step
num_generations = 8  # G, answers per prompt
max_completion_length = 4096  # longest answer, in tokens
temperature = 1.0  # sampling temperature (the log-probs of the loss use it too)
top_p = 1.0  # nucleus sampling; 1 = off
beta = 0.0  # k3 KL weight to the frozen initial model; 0 loads no reference model
epsilon = 0.2  # lower clip of the probability ratio: 1 - epsilon
epsilon_high = 0.2  # upper clip: 1 + epsilon_high (DAPO's clip-higher when larger than epsilon)
num_iterations = 1  # optimizer passes per generated batch
loss_type = "grpo"  # grpo | bnpo | dr_grpo | dapo
scale_rewards = "group"  # group | batch | none
mask_truncated_completions = True  # no loss on answers cut at max_completion_length
# reward (CUDA-L1 §3)
failure_reward = 0.0  # reward of an answer that fails (format, build, crash, wrong output, hack)
reward_clip = 1.5  # normalise rewards (over reward_norm's set), then clip to +-reward_clip; 0 disables
reward_norm = "batch"  # batch | group: normalise-and-clip over the batch or each prompt's group
# exemplars (CUDA-L1 §3: bucket sampling)
num_exemplars = 2  # earlier kernels with their speedups in each prompt
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
async_rollouts = False  # generate step k+1's rollouts while step k's kernels compile (docstring: staleness)
gen_batch_size = 32  # completions per transformers generate() call
use_vllm = False  # sample with a colocated vLLM engine; False = transformers generate
vllm_gpu_memory_utilization = 0.3  # the GPU memory share vLLM may take; training needs the rest
vllm_max_model_len = 0  # prompt + completion tokens vLLM reserves KV cache for; 0 = the model's maximum
dtype = "bfloat16"  # autocast dtype on CUDA; weights and optimizer stay in float32
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
# chaining (the presets): prepare.py and sft.py run before RL, evaluate.py after, with this command's shared settings
kernelbench_dir = ""  # "" = $KERNELBENCH_DIR or ../shared/kernelbench
download = False  # prepare.py fetches KernelBench from GitHub when kernelbench_dir does not exist
prepare_if_missing = False  # run prepare.py and sft.py first where their outputs are missing or unfinished
run_evaluate = False  # run evaluate.py after RL: the SFT model and the RL model side by side
# -----------------------------------------------------------------------------


def sample_exemplars(entries, n, rng, method="bucket", width=0.25, temp=1.0):
    """Pick n kernels from a task's database entries [{code, speedup, ...}] for the contrastive prompt.

    bucket (CUDA-L1 §3): group kernels into speedup buckets of width `width`; choose n distinct buckets with
    P(B_i) proportional to exp((mean_i - mu) / temp), mu = mean of the bucket means, drawn without replacement
    (computed as exp((mean_i - max) / temp), the same distribution without overflow);
    one kernel uniformly inside each chosen bucket. Fallbacks (documented, not in the paper): with n or fewer
    kernels all are used (a task with one successful kernel gets a one-exemplar prompt, a task with none the
    prompt without exemplars, i.e. the stage-1 prompt, until RL finds a correct kernel); with fewer buckets than n, one kernel from each bucket and the rest uniformly from the
    remaining kernels. random: n distinct kernels uniformly (the paper's "random" ablation).
    """
    if n <= 0 or not entries:
        return []
    if len(entries) <= n:
        return list(entries)
    if method == "random":
        return rng.sample(entries, n)
    assert method == "bucket", f"unknown exemplar_sampling {method!r}"
    buckets = {}
    for e in entries:
        buckets.setdefault(math.floor(e["speedup"] / width), []).append(e)
    keys = list(buckets)
    if len(keys) < n:
        picked = [rng.choice(buckets[k]) for k in keys]
        rest = [e for e in entries if all(e is not p for p in picked)]
        return picked + rng.sample(rest, n - len(picked))
    means = [sum(e["speedup"] for e in buckets[k]) / len(buckets[k]) for k in keys]
    chosen, left = [], list(range(len(keys)))
    for _ in range(n):  # distinct buckets: each draw is a softmax over the buckets not chosen yet
        top = max(means[i] for i in left)
        # exp((m - top) / temp) is exp((m - mu) / temp) times a constant: the same probabilities, but no overflow for
        # widely spread buckets at a low temp (1x and 1000x at temp=0.01; issue 13), and the largest weight is 1
        i = rng.choices(left, weights=[math.exp((means[j] - top) / temp) for j in left])[0]
        chosen.append(rng.choice(buckets[keys[i]]))
        left.remove(i)
    return chosen


def normalise_rewards(r, clip, over="batch", G=1):
    """CUDA-L1 §3: (r - mean) / std (population std), clipped to [-clip, clip]. r: (N,), grouped by prompt in
    consecutive runs of G. over="batch": one mean and std for the whole batch (all tasks mixed); over="group": per
    prompt's group, so that a task whose samples all run 4.5-5.5x next to failing tasks keeps its ordering instead of
    clipping to clip everywhere (issue 13; the paper does not say over which set). A group of equal rewards gives 0.
    clip=0 returns r. Raises ValueError for another `over`."""
    if over not in ("batch", "group"):
        raise ValueError(f"unknown reward_norm {over!r}: batch | group")
    if clip <= 0:
        return r
    x = r.view(-1, G) if over == "group" else r.view(1, -1)  # (groups, G) or (1, N)
    z = (x - x.mean(dim=1, keepdim=True)) / (x.std(dim=1, unbiased=False, keepdim=True) + 1e-8)
    return z.clamp(-clip, clip).reshape(-1)


def group_advantages(r, G, scale="group"):
    """GRPO advantages. r: (N,) rewards, N = num_prompts * G, grouped by prompt. Returns (N,).
    A_i = r_i - mean_group; divided by the group std + 1e-4 (scale="group"), the batch std + 1e-4 ("batch"),
    or not at all ("none", Dr. GRPO). std with Bessel's correction, as TRL. A group of equal rewards gets 0, and so
    does every sample when G = 1 (nothing to compare with; the std of one value would be NaN, issue 13)."""
    if G == 1:
        return torch.zeros_like(r)
    g = r.view(-1, G)
    a = g - g.mean(dim=1, keepdim=True)
    if scale == "group":
        a = a / (g.std(dim=1, keepdim=True) + 1e-4)
    elif scale == "batch":
        a = a / (r.std() + 1e-4)
    else:
        assert scale == "none", f"unknown scale_rewards {scale!r}"
    return a.reshape(-1)


def grpo_loss(logp, old_logp, advantages, mask, ref_logp=None, beta=0.0, epsilon=0.2, epsilon_high=None,
              loss_type="grpo", max_completion_length=None, num_sequences=None, num_tokens=None):
    """The clipped-ratio GRPO loss (REFERENCE.md §5), a pure function.

    logp, old_logp, ref_logp, mask: (B, T) per completion token; advantages: (B,). Per token:
      ratio = exp(logp - old_logp); surrogate = -min(ratio * A, clip(ratio, 1 - epsilon, 1 + epsilon_high) * A)
      + beta * (exp(ref - logp) - (ref - logp) - 1)  (k3 KL estimator, >= 0, 0 where logp == ref).
    Reduction by loss_type: grpo = mean over each sequence's tokens, then mean over sequences; bnpo = mean over the
    tokens of this batch; dr_grpo = sum / (num_sequences * max_completion_length); dapo = sum / num_tokens.
    num_sequences / num_tokens: totals of the whole generation batch when this call sees one micro-batch, so that
    the shares of the micro-batches add up to the full-batch loss (bnpo stays a per-micro-batch mean, as TRL).
    Returns (loss, stats) with stats = {kl, clip_frac} as floats.
    """
    eh = epsilon if epsilon_high is None else epsilon_high
    m = mask.float()
    A = advantages[:, None]  # (B, 1)
    ratio = torch.exp(logp - old_logp)  # (B, T)
    per_token = -torch.min(ratio * A, torch.clamp(ratio, 1 - epsilon, 1 + eh) * A)
    kl = torch.zeros_like(logp)
    if beta != 0.0:
        d = ref_logp - logp
        kl = torch.exp(d) - d - 1
        per_token = per_token + beta * kl
    B = num_sequences or logp.shape[0]
    if loss_type == "grpo":
        loss = ((per_token * m).sum(1) / m.sum(1).clamp(min=1.0)).sum() / B
    elif loss_type == "bnpo":
        loss = (per_token * m).sum() / m.sum().clamp(min=1.0)
    elif loss_type == "dr_grpo":
        assert max_completion_length, "dr_grpo needs max_completion_length"
        loss = (per_token * m).sum() / (B * max_completion_length)
    elif loss_type == "dapo":
        loss = (per_token * m).sum() / max(float(num_tokens or m.sum().item()), 1.0)
    else:
        raise ValueError(f"unknown loss_type {loss_type!r}")
    clipped = ((ratio < 1 - epsilon) & (A < 0)) | ((ratio > 1 + eh) & (A > 0))
    n = m.sum().clamp(min=1.0)
    return loss, dict(kl=((kl * m).sum() / n).item(), clip_frac=((clipped.float() * m).sum() / n).item())


completion_logp = common.completion_logp  # (B, C) log-probs, entropies, mask of completions (chunked head)


def record_behaviour_logp(model, samples, pad_id, amp=contextlib.nullcontext()):
    """async_rollouts: store in each sample old_logp, a list of one float per completion token: its log-prob under
    `model` as it is now, i.e. under the weights that just generated it (the behaviour policy). A no-grad forward
    through completion_logp, micro_batch_size rows at a time: the code path of the training log-probs, so with no
    update in between the importance ratio is 1 up to float rounding (padding differs between the two batchings)."""
    with torch.no_grad(), amp:
        for i in range(0, len(samples), micro_batch_size):
            rows = samples[i:i + micro_batch_size]
            logp = completion_logp(model, rows, pad_id, temperature, logp_chunk_size)[0].float().cpu()  # (b, C)
            for r, lp in zip(rows, logp):
                r["old_logp"] = lp[:len(r["completion_ids"])].tolist()


def behaviour_logp(rows, device="cpu"):
    """The rows' recorded old_logp as a (B, C) tensor laid out like completion_logp's output (C = longest
    completion, zeros where the mask is 0), or None unless every row has one (synchronous rollouts)."""
    if not rows or any("old_logp" not in r for r in rows):
        return None
    C = max(len(r["completion_ids"]) for r in rows)
    out = torch.zeros(len(rows), C)
    for i, r in enumerate(rows):
        assert len(r["old_logp"]) == len(r["completion_ids"]), "old_logp must have one value per completion token"
        out[i, :len(r["old_logp"])] = torch.tensor(r["old_logp"])
    return out.to(device)


def grpo_update(model, ref_model, opt, rows, row_adv, pad_id, amp=contextlib.nullcontext(), world=1, num_masked=0):
    """One GRPO update (num_iterations optimizer steps) on this rank's completions; hyperparameters are this module's
    config globals (beta, epsilon, epsilon_high, loss_type, micro_batch_size, temperature, grad_clip...).

    rows: dicts with prompt_ids and completion_ids (lists of token ids); row_adv: (len(rows),) advantages.
    num_masked: this rank's completions left out of the loss (truncated, with mask_truncated_completions): as in TRL,
    where their tokens are masked, they still count in the number of sequences B that grpo and dr_grpo divide by, so
    the step size does not grow with the truncation rate (issue 13); they are not run through the model.
    Under torchrun each rank passes its own rows: the loss is divided by the totals of all ranks (sequences, tokens,
    and for bnpo micro-batches) and the gradients summed over ranks (common.ddp_all_reduce_grads), so every rank makes
    the update one process would make on the whole batch, also with unequal ranks or a rank without rows (bnpo, a
    mean of per-micro-batch token means as in TRL, depends on where the micro-batches are cut: with micro_batch_size=1
    or rank sizes that are multiples of it the cuts are those of one process; dapo is the cut-free token mean).
    Log-probs always come from `model` itself, whatever sampled the completions; old_logp, the denominator of the
    ratio, is each row's recorded "old_logp" when every row of a micro-batch has one (async_rollouts: the weights
    that generated it), else the model's own log-probs before the first pass. Returns (stats, n_rows): stats =
    this rank's share of {loss, kl, clip_frac, entropy} (the shares of all ranks add up to the batch values), and
    n_rows = completions trained on in the whole batch (0: no update was made).
    """
    chunks = [list(range(i, min(i + micro_batch_size, len(rows)))) for i in range(0, len(rows), micro_batch_size)]
    n_rows, n_tokens, n_chunks, n_seq = map(sum, zip(*common.ddp_gather(
        (len(rows), sum(len(s["completion_ids"]) for s in rows), len(chunks), len(rows) + num_masked))))
    old, ref = {}, {}
    dev = next(model.parameters()).device
    with torch.no_grad(), amp:
        for c in chunks:
            recorded = behaviour_logp([rows[i] for i in c], dev)  # async_rollouts: the generating weights' log-probs
            if recorded is not None:
                old[c[0]] = recorded
            elif num_iterations > 1:
                old[c[0]] = completion_logp(model, [rows[i] for i in c], pad_id, temperature, logp_chunk_size)[0]
            if ref_model is not None:
                ref[c[0]] = completion_logp(ref_model, [rows[i] for i in c], pad_id, temperature, logp_chunk_size)[0]
    stats = dict(kl=0.0, clip_frac=0.0, entropy=0.0, loss=0.0)
    for _ in range(num_iterations if n_rows else 0):
        for c in chunks:
            with amp:
                logp, ent, m = completion_logp(model, [rows[i] for i in c], pad_id, temperature, logp_chunk_size)
                loss, sts = grpo_loss(logp, old.get(c[0], logp.detach()), row_adv[c].to(logp.device), m,
                                      ref_logp=ref.get(c[0]), beta=beta, epsilon=epsilon,
                                      epsilon_high=epsilon_high, loss_type=loss_type,
                                      max_completion_length=max_completion_length,
                                      num_sequences=n_seq, num_tokens=n_tokens)
                if loss_type == "bnpo":  # a per-micro-batch token mean (as TRL): the mean over all ranks' micro-batches
                    loss = loss / n_chunks
            loss.backward()
            w = len(c) / n_rows / num_iterations
            stats["loss"] += loss.item() / num_iterations
            stats["kl"] += sts["kl"] * w
            stats["clip_frac"] += sts["clip_frac"] * w
            stats["entropy"] += ((ent * m).sum() / m.sum().clamp(min=1)).item() * w
        common.ddp_all_reduce_grads(model)
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
    return stats, n_rows


if __name__ == "__main__":
    import bench
    from harness.batch import cpu_count
    from harness.scan import static_check
    common.exit_on_interrupt("continue with the same command and --resume=True")
    common.configure(globals())
    for key, ok in (("loss_type", ("grpo", "bnpo", "dr_grpo", "dapo")), ("scale_rewards", ("group", "batch", "none")),
                    ("reward_norm", ("batch", "group")),
                    ("exemplar_sampling", ("bucket", "random")), ("split", ("train", "eval", "all"))):
        if globals()[key] not in ok:
            sys.exit(f"error: --{key}={globals()[key]!r}; choose one of {', '.join(ok)}")
    common.check_device(device)
    argv = sys.argv[1:]
    rank, world, local_rank, device = common.ddp_setup(device)
    master = rank == 0  # only rank 0 writes files
    if num_prompts % world:
        sys.exit(f"error: num_prompts={num_prompts} must be a multiple of the {world} ranks")
    k_local = num_prompts // world  # prompts of this rank
    rl_dir = os.path.join(out_dir, "rl")
    # the earlier stages, when the preset chains them: rank 0 runs them, the other ranks wait at the barrier. A stage
    # whose output is missing runs; so does one an interrupt left unfinished (chain.json), continuing where it was.
    if master and prepare_if_missing:
        stages.run_earlier(argv, out_dir, resume, policy)
    common.ddp_barrier()
    t_rl = time.time()
    log_path = os.path.join(rl_dir, "log.jsonl")
    if not resume and os.path.exists(log_path) and os.path.getsize(log_path) > 0:
        n_logged = len(common.read_jsonl(log_path))
        report = os.path.join(out_dir, "eval", "summary.md")
        if n_logged >= max_steps and os.path.exists(report):   # the README: "it says the run is finished" (not an error)
            print(f"{rl_dir} holds a finished run (report: {report}): --resume=True prints the report again; --out_dir=ANOTHER_FOLDER makes another run")
            sys.exit(0)
        sys.exit(f"error: {rl_dir} already holds a run ({n_logged} logged steps): --resume=True continues it; for another "
                 f"run point --out_dir at another folder (or at a copy of this one without rl/ and eval/, to reuse its data and SFT model)")
    os.makedirs(rl_dir, exist_ok=True)
    rng = random.Random(seed)  # shared by all ranks: which tasks each step trains on
    rank_rng = random.Random(seed + 1 + rank)  # this rank's exemplar draws
    torch.manual_seed(seed + rank)  # this rank's sampling

    if not os.path.exists(os.path.join(out_dir, "tasks.jsonl")):
        sys.exit(f"error: no task set {out_dir}/tasks.jsonl: run prepare.py first (or give --out_dir)")
    tasks = {t["name"]: t for t in common.read_jsonl(os.path.join(out_dir, "tasks.jsonl"))}
    train_tasks = sorted(n for n, t in tasks.items() if split == "all" or t["split"] == split)
    # a task whose check a trivial output passes (zeros, a constant, the input) rewards a kernel for doing nothing
    degenerate = [n for n in train_tasks if tasks[n].get("degenerate")]
    if degenerate and not train_degenerate:
        train_tasks = [n for n in train_tasks if n not in degenerate]
        if rank == 0:
            print(f"not training on {len(degenerate)} degenerate tasks (prepare.py's screen; --train_degenerate=True "
                  f"to include them): {', '.join(degenerate[:8])}{' ...' if len(degenerate) > 8 else ''}")
    if not train_tasks:
        sys.exit(f"error: no tasks with split={split!r} in {out_dir}/tasks.jsonl" + (
            f" that are not degenerate ({len(degenerate)} are; --train_degenerate=True to use them)" if degenerate else ""))
    try:
        db, cache = stages.load_database(out_dir, list(tasks))
        if result_cache:  # measurements of an earlier run on the same GPU (same task + same source = same kernel)
            cache.update(common.read_json(result_cache))
    except (ValueError, OSError) as e:
        sys.exit(f"error: {e}")
    best_seed = {n: max([e["speedup"] for e in db[n]], default=0.0) or 1.0 for n in tasks}

    ckpt_dir = os.path.join(rl_dir, "ckpt")
    state_path = os.path.join(ckpt_dir, "state.pt")
    resuming = resume and os.path.exists(state_path)
    st = torch.load(state_path, weights_only=False) if resuming else None
    if resume and not resuming:
        print(f"--resume: no checkpoint in {ckpt_dir}, starting at step 0")
    init_src = (st or {}).get("init_src") or policy or (os.path.join(out_dir, "sft") if os.path.exists(
        os.path.join(out_dir, "sft", "config.json")) else default_model)
    try:
        model, tok = common.load_model(ckpt_dir if resuming else init_src, device=device)
        # the KL anchor is the model RL started from, also after a resume (not the checkpoint)
        ref_model = common.load_model(init_src, device=device)[0].eval().requires_grad_(False) if beta else None
    except RuntimeError as e:
        raise SystemExit(f"error: {e}")
    model.train()
    if gradient_checkpointing:
        common.enable_checkpointing(model)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay, betas=(0.9, 0.99))
    step, history, pending = 0, [], None  # pending: the next step's batch, generated ahead (async_rollouts)
    if resuming:
        opt.load_state_dict(st["opt"])
        step, history, db, cache = st["step"], st["history"], st["db"], {**cache, **st["cache"]}
        rng.setstate(st["rng"] if "rng" in st else st["py_rng"])  # py_rng: checkpoints of the walking skeleton
        if len(st.get("rank_rng", [])) == world:
            rs = st["rank_rng"][rank]
            rank_rng.setstate(rs["py"])
            torch.set_rng_state(rs["torch"])
            if rs["cuda"] is not None and device.startswith("cuda"):
                torch.cuda.set_rng_state(rs["cuda"])
            pending = rs.get("pending")  # the batch an async run had generated for this step
        else:  # another world size, or a Ctrl-C checkpoint of a torchrun: fresh per-rank streams
            print(f"rank {rank}: checkpoint has no RNG state for {world} rank(s): reseeding")
            rank_rng.seed(seed + 1 + rank + 1000 * step)
            torch.manual_seed(seed + rank + 1000 * step)
        print(f"resumed from {ckpt_dir} at step {step}" +   # a finished run: say so (a newcomer read a restart)
              (f" (all {max_steps} steps done: no more training, the report again)" if step >= max_steps else ""))
    llm = None
    if use_vllm:
        try:
            llm = common.load_vllm(ckpt_dir if resuming else init_src, vllm_gpu_memory_utilization, seed=seed + rank,
                                   dtype=dtype if device.startswith("cuda") else "float32",
                                   max_model_len=vllm_max_model_len or None)
        except RuntimeError as e:
            raise SystemExit(f"error: {e}")
    amp = torch.autocast("cuda", dtype=getattr(torch, dtype), enabled=device.startswith("cuda") and dtype != "float32")
    if master:
        print(f"policy {init_src}: {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M params; {len(train_tasks)} "
              f"tasks; {num_prompts}x{num_generations} samples per step on {world} rank(s); "
              f"rollouts by {'vLLM' if llm else 'transformers'}")

    def rng_state():
        """This rank's RNG states, and (async_rollouts) the batch generated for the next step, saved with them."""
        return dict(py=rank_rng.getstate(), torch=torch.get_rng_state(),
                    cuda=torch.cuda.get_rng_state() if device.startswith("cuda") else None, pending=pending)

    def rollouts():
        """Steps 1-2 of the docstring: this step's prompts (the same task list on every rank from the shared rng,
        this rank's slice) and num_generations samples each, every sample with its task; with async_rollouts also
        old_logp, the generating weights' log-probs of its tokens (behaviour_logp)."""
        names = rng.sample(train_tasks, min(num_prompts, len(train_tasks)))
        names += rng.choices(train_tasks, k=num_prompts - len(names))  # fewer tasks than prompts: repeat
        names = names[rank * k_local:(rank + 1) * k_local]
        prompts = []
        for n in names:
            ex = sample_exemplars(db[n], num_exemplars, rank_rng, exemplar_sampling, delta_s, tau)
            prompts.append(prompting.contrastive_prompt(tasks[n]["src"], [(e["code"], e["speedup"]) for e in ex],
                                                     gpu_name))
        if llm is not None:
            out = common.vllm_generate(llm, tok, prompts, num_generations, max_completion_length, temperature, top_p)
        else:
            out = list(common.generate(model, tok, prompts, num_generations, max_completion_length, temperature,
                                       top_p, batch_size=gen_batch_size))
        for i, s in enumerate(out):
            s["task"] = names[i // num_generations]
        if async_rollouts:
            record_behaviour_logp(model, out, tok.pad_token_id, amp)
        return out

    workers = build_workers or max(1, cpu_count() // world)
    on_my_gpu = lambda: (common.visible_gpu(local_rank) if world > 1 and device.startswith("cuda")
                         else contextlib.nullcontext())  # bench's children see this rank's GPU only

    def evaluate(jobs):
        """bench.evaluate_many on this rank's GPU: {key: result} for {key: (task, task_src, code)}."""
        if not jobs:
            return {}
        with on_my_gpu():
            out = bench.evaluate_many(list(jobs.values()), device=device.split(":")[0], arch=arch or None,
                                      num_correct_trials=num_correct_trials, time_budget_s=time_budget_s,
                                      timeout_s=timeout_s, build_workers=workers)
        return dict(zip(jobs, out))

    def prebuild(jobs):
        """async_rollouts: compile the new kernels into bench's build cache (bench.build, child processes on CPU
        cores, `workers` at a time) while the main thread generates; those bench's static checks flag are never
        built, as in evaluate_many. Returns the wall seconds."""
        t = time.time()
        todo = [code for _, src, code in jobs.values() if not static_check(code, src)]
        with on_my_gpu(), concurrent.futures.ThreadPoolExecutor(workers) as pool:
            list(pool.map(lambda code: bench.build(code, device=device.split(":")[0], arch=arch or None,
                                                   timeout_s=max(600.0, timeout_s)), todo))
        return time.time() - t
    build_thread = concurrent.futures.ThreadPoolExecutor(1)  # async_rollouts: compiles next to generation

    def save(rank_rngs):
        """Rank 0 only: model, optimizer, step, history, database, result cache and every rank's RNG states."""
        os.makedirs(ckpt_dir, exist_ok=True)
        model.save_pretrained(ckpt_dir)
        tok.save_pretrained(ckpt_dir)
        torch.save(dict(opt=opt.state_dict(), step=step, history=history, db=db, cache=cache, rng=rng.getstate(),
                        rank_rng=rank_rngs, init_src=init_src, config=common.config_keys(globals())),
                   state_path + ".tmp")
        os.replace(state_path + ".tmp", state_path)
        common.write_json_atomic(os.path.join(rl_dir, "db.json"), db)
        common.write_json_atomic(os.path.join(rl_dir, "cache.json"), cache)
        if history:
            plot(history, os.path.join(rl_dir, "curves.png"))

    # Ctrl-C (SIGINT) or SIGTERM (what torchrun sends its ranks on Ctrl-C): finish the step, save, exit with 130;
    # the checkpoint is then at a step boundary and --resume continues exactly. A second Ctrl-C stops at once.
    stop = []

    def on_signal(sig, frame):
        if sig == signal.SIGINT and signal.SIGINT in stop:
            raise KeyboardInterrupt
        if not stop and master:
            print(f"rl.py interrupted during RL step {step} (stage 3 of 4 when chained): finishing the step, then saving "
                  "a checkpoint (Ctrl-C again: quit without)", flush=True)
        stop.append(sig)
    handlers = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        while step < max_steps:
            t0 = time.time()
            # 1-2. prompts and rollouts; with async_rollouts this batch was generated while the previous step's
            # kernels compiled, by the weights before the previous update (staleness 1: see the docstring)
            staleness = 0 if pending is None else 1
            samples = pending if pending is not None else rollouts()
            pending = None
            t1 = time.time()
            # 3. code extraction and evaluation of each distinct new kernel (once over all ranks: lowest rank wins)
            todo = {}
            for s in samples:
                s["code"], s["format_error"] = prompting.extract_code(s["text"])
                if s["code"] is not None:
                    s["key"] = sha(s["task"], s["code"])
                    if s["key"] not in cache:
                        todo[s["key"]] = (s["task"], tasks[s["task"]]["src"], s["code"])
            claimed = set().union(*common.ddp_gather(set(todo))[:rank])  # a collective: every rank calls it
            mine = {k: v for k, v in todo.items() if k not in claimed}
            if async_rollouts:  # the next step's batch from the current weights while this one's kernels compile
                job = build_thread.submit(prebuild, mine)
                pending = rollouts()  # (also at the last step: it is saved, so --resume continues exactly)
            t_next, t_build = time.time() - t1, job.result() if async_rollouts else 0.0
            te = time.time()
            results = evaluate(mine)  # timed on a GPU that is not generating (async: from cached builds)
            t_eval = t_build + time.time() - te
            for part in common.ddp_gather(results):
                cache.update(part)
            t2 = time.time()
            # 4. rewards; normalised over the whole batch (all ranks) or per group, then group advantages (groups never
            # span ranks)
            for s in samples:
                res = cache.get(s.get("key"))
                s["status"] = "format_error" if res is None else res["status"]
                s["speedup"] = res["speedup"] if res is not None and res["status"] == "ok" else None
                s["reward"] = s["speedup"] if s["speedup"] is not None else failure_reward
                s["hack_kind"] = res.get("hack") if res is not None and res["status"] == "hack" else None
            N_local = len(samples)
            raw_all = torch.tensor(sum(common.ddp_gather([s["reward"] for s in samples]), []), dtype=torch.float32)
            norm_all = normalise_rewards(raw_all, reward_clip, reward_norm, num_generations)
            adv = group_advantages(norm_all, num_generations, scale_rewards)[rank * N_local:(rank + 1) * N_local]
            norm = norm_all[rank * N_local:(rank + 1) * N_local]
            # 5. GRPO update; the loss of each rank is divided by the totals of the whole batch, grads summed
            keep = [i for i, s in enumerate(samples) if not (mask_truncated_completions and s["truncated"])]
            rows = [samples[i] for i in keep]
            row_adv = adv[keep] if keep else torch.zeros(0)
            stats, n_rows = grpo_update(model, ref_model, opt, rows, row_adv, tok.pad_token_id, amp, world,
                                        num_masked=len(samples) - len(rows))
            if llm is not None and n_rows:
                common.vllm_push_weights(llm, model)  # the next rollouts sample from the updated policy
            t3 = time.time()
            # 6. the exemplar database grows with every new correct kernel of every rank, in rank order
            found = [dict(task=s["task"], code=s["code"], speedup=s["speedup"]) for s in samples if s["speedup"] is not None]
            for part in common.ddp_gather(found):
                for e in part:
                    if all(x["code"] != e["code"] for x in db[e["task"]]):
                        db[e["task"]].append(dict(code=e["code"], speedup=e["speedup"], step=step, source="rl"))
            # log (rank 0): one line per step over the samples of all ranks; every sample in samples.jsonl, with the
            # error and where its evaluation's seconds went when this step measured its kernel (why a step is slow)
            def timing(s):
                res = cache.get(s.get("key")) or {}
                return dict(error=(res.get("error") or "")[:300] or None, **({k: res.get(k) for k in (
                    "compile_s", "eval_s", "phase_s")} if s.get("key") in mine else {}))
            recs = [dict(step=step, rank=rank, task=s["task"], status=s["status"], format_error=s["format_error"],
                         hack=s["hack_kind"], speedup=s["speedup"], reward=s["reward"], reward_norm=float(norm[i]),
                         advantage=float(adv[i]), truncated=s["truncated"], completion_len=len(s["completion_ids"]),
                         completion=s["text"], code=s["code"], **timing(s)) for i, s in enumerate(samples)]
            t_gen = (t1 - t0) + (t_next if async_rollouts else 0.0)  # generating in this step (async: the next batch)
            gathered = common.ddp_gather(dict(recs=recs, stats=stats, t=(t_gen, t_eval, t3 - t2),
                                              new=len(mine), psum=common.param_checksum(model) if world > 1 else None))
            step += 1
            if master:
                recs = sum((g["recs"] for g in gathered), [])
                stats = {k: sum(g["stats"][k] for g in gathered) for k in stats}
                h = step_summary(step - 1, recs, best_seed, stats)
                h.update(new_kernels=sum(g["new"] for g in gathered), world_size=world, rollout_staleness=staleness,
                         t_gen=max(g["t"][0] for g in gathered), t_eval=max(g["t"][1] for g in gathered),
                         t_train=max(g["t"][2] for g in gathered), t_step=time.time() - t0, wall=time.time())
                if world > 1:
                    h["param_checksums"] = [g["psum"] for g in gathered]  # equal on every rank, or DDP is broken
                    if len(set(h["param_checksums"])) > 1:
                        print(f"warning: ranks hold different weights after step {step - 1}: {h['param_checksums']}")
                history.append(h)
                print(format_line(h), flush=True)
                for r in recs:
                    if r["status"] == "hack":
                        common.append_jsonl(os.path.join(rl_dir, "hacks.jsonl"),
                                            dict(step=r["step"], task=r["task"], hack=r["hack"], code=r["code"]))
                    common.append_jsonl(os.path.join(rl_dir, "samples.jsonl"), r)
                common.append_jsonl(os.path.join(rl_dir, "log.jsonl"), h)
            halt = any(common.ddp_gather(bool(stop)))  # every rank stops at the same step
            if step % save_interval == 0 or step == max_steps or halt:
                rank_rngs = common.ddp_gather(rng_state())
                if master:
                    save(rank_rngs)
            if halt:
                if master:
                    again = " ".join(["python"] + [shlex.quote(a) for a in sys.argv if a != "--resume=True"]
                                     + ["--resume=True"]) if world == 1 else "the same torchrun command and --resume=True"
                    print(f"saved a checkpoint after RL step {step - 1} ({step} of {max_steps} steps done) in "
                          f"{ckpt_dir}; continue with: {again}", flush=True)
                sys.exit(130)
    except KeyboardInterrupt:
        print(f"rank {rank}: stopped at once, no checkpoint written; --resume=True continues from the last one")
        sys.exit(130)
    for sig, handler in handlers.items():  # RL is over: an interrupt from here on is no step's
        signal.signal(sig, handler)
    if master and history:
        first, last = history[0], history[-1]
        print(f"speedup of sampled kernels (failures as 0): step 0 {first['speedup_all']:.2f}x -> step {last['step']} "
              f"{last['speedup_all']:.2f}x; fraction of the best seed kernel {first['frac_of_best']:.2f} -> {last['frac_of_best']:.2f}")
    del llm
    common.ddp_cleanup()
    stages.STAGE_S["rl.py"] = time.time() - t_rl
    if master and run_evaluate:  # the model before RL and after, on the same prompts (issue 14 item 2)
        stages.run_stage("evaluate.py", argv, out_dir, resume, [f"--model=before_rl={init_src},after_rl={ckpt_dir}"])
    if master:
        stages.print_wall_time()
