"""rl.py's logs: a record per sample (samples.jsonl, hacks.jsonl), one line per step (log.jsonl and the terminal,
nanochat-style) and the training curves (curves.png), from the sample records of all ranks."""
import os
import time

import common


def sample_records(step, rank, samples, rewards_norm, advantages, cache, measured):
    """One record per sample: outcome, reward, advantage, completion and code; the error, and where the evaluation's
    seconds went when this step measured the kernel (`measured`: the keys this rank evaluated), say why a step is
    slow. rewards_norm, advantages: (N,) tensors of this rank's samples."""
    def timing(s):
        res = cache.get(s.get("key")) or {}
        phases = {k: res.get(k) for k in ("compile_s", "eval_s", "phase_s")} if s.get("key") in measured else {}
        return dict(error=(res.get("error") or "")[:300] or None, **phases)
    return [dict(step=step, rank=rank, task=s["task"], status=s["status"], format_error=s["format_error"],
                 hack=s["hack_kind"], speedup=s["speedup"], reward=s["reward"], reward_norm=float(rewards_norm[i]),
                 advantage=float(advantages[i]), truncated=s["truncated"], completion_len=len(s["completion_ids"]),
                 completion=s["text"], code=s["code"], **timing(s)) for i, s in enumerate(samples)]


def write_step(rl_dir, recs, summary):
    """Append the step's records to samples.jsonl (the hacks also to hacks.jsonl) and its summary to log.jsonl."""
    for r in recs:
        if r["status"] == "hack":
            common.append_jsonl(os.path.join(rl_dir, "hacks.jsonl"),
                                dict(step=r["step"], task=r["task"], hack=r["hack"], code=r["code"]))
        common.append_jsonl(os.path.join(rl_dir, "samples.jsonl"), r)
    common.append_jsonl(os.path.join(rl_dir, "log.jsonl"), summary)


def log_step(rl_dir, step, gathered, best_seed, staleness, t_start):
    """Rank 0: the step's summary from what every rank gathered (dicts of recs, stats, t = (gen, eval, train) s, new
    kernels, psum = parameter checksum under torchrun, gen_tokens, peak_gib), printed as one line and written with
    every sample record. A step's time is its slowest rank's; gen_tokens_per_s: the tokens all ranks generated / the
    slowest rank's generation seconds; peak_memory_gib: the largest rank's (None on the CPU); grad_norm: before the
    clip (None when nothing was trained). Returns the summary."""
    recs = sum((g["recs"] for g in gathered), [])
    stats = {k: sum(g["stats"][k] for g in gathered) for k in gathered[0]["stats"] if k != "grad_norm"}
    summary = step_summary(step, recs, best_seed, stats)
    t_gen, peaks = max(g["t"][0] for g in gathered), [g["peak_gib"] for g in gathered if g["peak_gib"] is not None]
    summary.update(new_kernels=sum(g["new"] for g in gathered), world_size=len(gathered), rollout_staleness=staleness,
                   t_gen=t_gen, t_eval=max(g["t"][1] for g in gathered),
                   t_train=max(g["t"][2] for g in gathered), t_step=time.time() - t_start, wall=time.time(),
                   gen_tokens_per_s=sum(g["gen_tokens"] for g in gathered) / max(t_gen, 1e-9),
                   peak_memory_gib=max(peaks) if peaks else None, grad_norm=gathered[0]["stats"].get("grad_norm"))
    if len(gathered) > 1:
        summary["param_checksums"] = [g["psum"] for g in gathered]  # equal on every rank, or DDP is broken
        if len(set(summary["param_checksums"])) > 1:
            print(f"warning: ranks hold different weights after step {step}: {summary['param_checksums']}")
    print(format_line(summary), flush=True)
    write_step(rl_dir, recs, summary)
    return summary


def generated_tokens(samples, pending, staleness):
    """Completion tokens this rank generated in the step: the batch it trains on when generated now (staleness 0),
    and with async_rollouts the next step's batch (pending), generated during this step."""
    batches = ([samples] if staleness == 0 else []) + ([pending] if pending is not None else [])
    return sum(len(s["completion_ids"]) for batch in batches for s in batch)


def peak_memory_gib(device):
    """This process's peak GPU memory in torch's allocator since the last call (torch.cuda.max_memory_allocated,
    GiB), the peak then reset so that each step logs its own; None on the CPU."""
    import torch
    if not str(device).startswith("cuda"):
        return None
    peak = torch.cuda.max_memory_allocated(device) / 2 ** 30
    torch.cuda.reset_peak_memory_stats(device)
    return peak


def final_line(history):
    """The run's first and last step: mean speedup of the sampled kernels and the fraction of the best seed kernel."""
    first, last = history[0], history[-1]
    return (f"speedup of sampled kernels (failures as 0): step 0 {first['speedup_all']:.2f}x -> step {last['step']} "
            f"{last['speedup_all']:.2f}x; fraction of the best seed kernel {first['frac_of_best']:.2f} -> "
            f"{last['frac_of_best']:.2f}")


def step_summary(step, recs, best_seed, stats):
    """The log line of one step from the sample records of all ranks: mean reward (raw, x); speedup (x) of correct
    kernels: mean, median, max, and the mean over all samples with failures as 0; frac_of_best: speedup / the task's
    best seed kernel, failures as 0; the fraction of samples per outcome; mean completion length (tokens)."""
    n = len(recs)
    speedups = sorted(r["speedup"] for r in recs if r["speedup"] is not None)
    frac = lambda *ks: sum(r["status"] in ks for r in recs) / n
    return dict(step=step, reward=sum(r["reward"] for r in recs) / n, speedup_all=sum(speedups) / n,
                speedup_mean=sum(speedups) / max(len(speedups), 1),
                speedup_median=speedups[len(speedups) // 2] if speedups else 0.0,
                speedup_max=max(speedups, default=0.0),
                frac_of_best=sum((r["speedup"] or 0.0) / best_seed[r["task"]] for r in recs) / n,
                ok=frac("ok"), compile_error=frac("compile_error"), incorrect=frac("incorrect"), hack=frac("hack"),
                format_error=frac("format_error"), crash=frac("crash", "timeout", "runtime_error"),
                completion_len=sum(r["completion_len"] for r in recs) / n,
                truncated=sum(r["truncated"] for r in recs) / n, **stats)


def format_line(h):
    """The terminal line of a step's summary. gap: mean |old_logp - sampler_logp| per token (the trainer's and the
    sampling engine's log-probs, training/sampler.py), capped: the fraction of tokens whose TIS weight hit its cap;
    both 0 when the training weights sample."""
    return (f"step {h['step']:4d} | reward {h['reward']:.3f} | speedup all {h['speedup_all']:.2f}x "
            f"correct {h['speedup_mean']:.2f}x med {h['speedup_median']:.2f}x max {h['speedup_max']:.2f}x "
            f"| of-best {h['frac_of_best']:.2f} | ok {h['ok']:.2f} compile {h['compile_error']:.2f} "
            f"wrong {h['incorrect']:.2f} crash {h['crash']:.2f} hack {h['hack']:.2f} format {h['format_error']:.2f} "
            f"| loss {h['loss']:.4f} kl {h['kl']:.4f} clip {h['clip_frac']:.3f} ent {h['entropy']:.3f} "
            f"gap {h.get('logp_gap', 0.0):.4f} capped {h.get('is_capped', 0.0):.3f} "
            f"len {h['completion_len']:.0f} | new {h['new_kernels']} | gen {h['t_gen']:.1f}s eval {h['t_eval']:.1f}s "
            f"train {h['t_train']:.1f}s | {h['gen_tokens_per_s']:.0f} tok/s gen"
            + (f" mem {h['peak_memory_gib']:.1f} GiB" if h.get("peak_memory_gib") is not None else "")
            + (f" gnorm {h['grad_norm']:.3g}" if h.get("grad_norm") is not None else ""))


def plot(history, path):
    """Training curves (PNG): speedup of sampled kernels, outcome fractions, reward / KL / entropy per step."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    steps = [h["step"] for h in history]
    fig, ax = plt.subplots(1, 4, figsize=(18, 3.6))
    ax[0].plot(steps, [h["speedup_all"] for h in history], label="mean speedup, failures as 0")
    ax[0].plot(steps, [h["speedup_mean"] for h in history], label="mean speedup of correct kernels")
    ax[0].set_xlabel("step"); ax[0].set_ylabel("x"); ax[0].legend(fontsize=7)
    ax[1].plot(steps, [h["frac_of_best"] for h in history])
    ax[1].set_xlabel("step"); ax[1].set_ylabel("speedup / best seed kernel's")
    ax[1].set_ylim(0, max(1.1, max(h["frac_of_best"] for h in history) * 1.05))
    for k in ("ok", "compile_error", "incorrect", "crash", "hack", "format_error"):
        ax[2].plot(steps, [h[k] for h in history], label=k)
    ax[2].set_xlabel("step"); ax[2].set_ylabel("fraction of samples"); ax[2].legend(fontsize=7)
    for k in ("reward", "kl", "entropy", "clip_frac"):
        ax[3].plot(steps, [h[k] for h in history], label=k)
    ax[3].set_xlabel("step"); ax[3].set_yscale("symlog", linthresh=1e-3); ax[3].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
