"""Rollout plumbing of rl.py: the behaviour policy's log-probs, and the evaluation of a step's kernels with bench.py.

Async rollouts (async_rollouts=True; TRL's async GRPO). While bench.py compiles step k's new kernels (bench.build in
child processes on CPU cores, driven from a thread: prebuild_kernels), the main thread already generates step k+1's
batch with the current weights theta_k; the kernels are timed (evaluate_kernels, builds now cached) only once the
generation is done, so no timing shares the GPU with the policy. Compiles are most of an evaluation (REFERENCE.md
§2: 50-60 s per load_inline build). Step k's update then changes theta_k: the batch trained on at step k+1 was
sampled by theta_k and is trained on at theta_k+1, one update stale (rollout_staleness = 1 in the log). The
correction is PPO's importance ratio to the behaviour policy: right after generating, a no-grad forward of the
generating weights records every token's log-prob (record_behaviour_logp, through the same completion_logp as
training), and grpo_loss takes ratio = exp(logp - old_logp), clipped to [1 - epsilon, 1 + epsilon_high]: a token
whose ratio has already left the band in the direction its advantage pushes gives no gradient (clip_frac in the
log). With num_iterations > 1 the recorded old_logp serves every pass. The k3 KL term is taken on the stale tokens
without an importance weight, as TRL does, so its logged value is not the on-policy estimate. The prompts of step
k+1 are written before step k's kernels enter the database (exemplars lag one step). Every step, the last too,
generates the next batch, which the checkpoint keeps, so --resume continues exactly.
"""
import concurrent.futures
import contextlib
import time

import torch

from training import ddp
from training.models import completion_logp


def record_behaviour_logp(model, samples, pad_id, temperature, micro_batch_size, chunk_size,
                          amp=contextlib.nullcontext()):
    """Store in each sample old_logp, one float per completion token: its log-prob under `model` as it is now, the
    weights that just generated it (the behaviour policy). A no-grad forward through completion_logp, micro_batch_size
    rows at a time: the code path of the training log-probs, so with no update in between the importance ratio is 1
    up to float rounding (padding differs between the two batchings)."""
    with torch.no_grad(), amp:
        for i in range(0, len(samples), micro_batch_size):
            rows = samples[i:i + micro_batch_size]
            logp = completion_logp(model, rows, pad_id, temperature, chunk_size)[0].float().cpu()  # (b, C)
            for row, row_logp in zip(rows, logp):
                row["old_logp"] = row_logp[:len(row["completion_ids"])].tolist()


def behaviour_logp(rows, device="cpu", key="old_logp"):
    """The rows' recorded log-probs `key` (old_logp; sampler_logp: the sampling engine's, training/sampler.py) as a
    (B, C) tensor laid out like completion_logp's output (C = longest completion, zeros where the mask is 0), or
    None unless every row has one (synchronous rollouts; an engine that records none)."""
    if not rows or any(key not in r for r in rows):
        return None
    longest = max(len(r["completion_ids"]) for r in rows)
    out = torch.zeros(len(rows), longest)
    for i, r in enumerate(rows):
        assert len(r[key]) == len(r["completion_ids"]), f"{key} must have one value per completion token"
        out[i, :len(r[key])] = torch.tensor(r[key])
    return out.to(device)


def rank_gpu(local_rank, world, device):
    """A context in which bench.py's child processes see only this rank's GPU (under torchrun on CUDA)."""
    if world > 1 and device.startswith("cuda"):
        return ddp.visible_gpu(local_rank)
    return contextlib.nullcontext()


def evaluate_kernels(jobs, gpu_scope, **bench_kw):
    """bench.evaluate_many on this rank's GPU: {key: result} for jobs {key: (task, task_src, code)}. gpu_scope: a
    callable returning the context of rank_gpu; bench_kw: device, arch, num_correct_trials, time_budget_s, timeout_s,
    build_workers. The memory torch's allocator holds cached in this process is released first: bench's processes
    time the kernels on the same GPU, and large tasks need tens of GB there."""
    import bench
    if not jobs:
        return {}
    if torch.cuda.is_initialized():  # the policy's cached blocks (KV cache, activations) back to bench's processes
        torch.cuda.empty_cache()
    with gpu_scope():
        out = bench.evaluate_many(list(jobs.values()), **bench_kw)
    return dict(zip(jobs, out))


def prebuild_kernels(jobs, gpu_scope, device, arch, timeout_s, workers):
    """Compile the jobs' kernels into bench's build cache (bench.build in child processes, `workers` at a time), for
    evaluate_kernels to time later; kernels that bench's static checks flag are never built, as in evaluate_many.
    Returns the wall seconds."""
    import bench
    from harness.scan import static_check
    start = time.time()
    todo = [code for _, src, code in jobs.values() if not static_check(code, src)]
    with gpu_scope(), concurrent.futures.ThreadPoolExecutor(workers) as pool:
        list(pool.map(lambda code: bench.build(code, device=device, arch=arch, timeout_s=max(600.0, timeout_s)), todo))
    return time.time() - start
