"""rl_log.py: rl.py's per-step log line and training curves, pure functions of the sample records (one line per
step, nanochat-style); kept apart so that rl.py reads in one sitting."""


def step_summary(step, recs, best_seed, stats):
    """The log line of one step from the sample records of all ranks: mean reward (raw, x); speedup (x) of correct
    kernels: mean, median, max, and the mean over all samples with failures as 0; frac_of_best: speedup / the task's
    best seed kernel, failures as 0; the fraction of samples per outcome; mean completion length (tokens)."""
    N = len(recs)
    sp = sorted(r["speedup"] for r in recs if r["speedup"] is not None)
    frac = lambda *ks: sum(r["status"] in ks for r in recs) / N
    return dict(step=step, reward=sum(r["reward"] for r in recs) / N, speedup_all=sum(sp) / N,
                speedup_mean=sum(sp) / max(len(sp), 1), speedup_median=sp[len(sp) // 2] if sp else 0.0,
                speedup_max=max(sp, default=0.0),
                frac_of_best=sum((r["speedup"] or 0.0) / best_seed[r["task"]] for r in recs) / N,
                ok=frac("ok"), compile_error=frac("compile_error"), incorrect=frac("incorrect"), hack=frac("hack"),
                format_error=frac("format_error"), crash=frac("crash", "timeout", "runtime_error"),
                completion_len=sum(r["completion_len"] for r in recs) / N,
                truncated=sum(r["truncated"] for r in recs) / N, **stats)


def format_line(h):
    return (f"step {h['step']:4d} | reward {h['reward']:.3f} | speedup all {h['speedup_all']:.2f}x "
            f"ok {h['speedup_mean']:.2f}x med {h['speedup_median']:.2f}x max {h['speedup_max']:.2f}x "
            f"| of-best {h['frac_of_best']:.2f} | ok {h['ok']:.2f} compile {h['compile_error']:.2f} "
            f"wrong {h['incorrect']:.2f} crash {h['crash']:.2f} hack {h['hack']:.2f} format {h['format_error']:.2f} "
            f"| loss {h['loss']:.4f} kl {h['kl']:.4f} clip {h['clip_frac']:.3f} ent {h['entropy']:.3f} "
            f"len {h['completion_len']:.0f} | new {h['new_kernels']} | gen {h['t_gen']:.1f}s eval {h['t_eval']:.1f}s "
            f"train {h['t_train']:.1f}s")


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
