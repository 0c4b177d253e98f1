"""
evaluate.py's report: the statistics of CUDA-L1's tables (REFERENCE.md §1.5, §2), the degenerate-task sources
(§3), summary.md / summary.json, per_task.csv and the plots, from the rows evaluate.py measured.

Statistics (summarize): the paper's headline mean counts a failed task as 1.0x (the reference is kept); also the mean
over successful tasks only, median / geometric mean / max / p25 / p50 / p75 with the same padding, the number of tasks
> 1.01x (the paper's second headline number) and KernelBench's fast_p = share of ALL tasks of a level that are correct
AND faster than p x, strictly (fast_0 = correctness rate). Every table is repeated without the degenerate tasks
(REFERENCE.md §3): a task is degenerate if its tasks_file row says so (prepare.py's screen), else by bench's
degenerate_screen (for tasks that carry their own reference), else, for KernelBench level 1-3 names, by the list of
the H200 scan in REFERENCE.md §3 (DEGENERATE_H200); otherwise unknown, and the report says so.

For a model with several answers per task, the tables use the best of N; "per sample" adds the mean over every
answer (a failure counts as 0, as RL's reward does), which is what RL changes, side by side for several models
(before and after RL, say).
"""
import collections
import csv
import math
import os
import re
import shlex
import subprocess
import sys
import time

import numpy as np

import common

FAST_P = (0, 1, 1.5, 2)
# REFERENCE.md §3: the 47 KernelBench L1-L3 tasks (by level and problem id) whose check a trivial output (zeros, a
# constant, the input) passes at 1e-2, from the H200 scan of the KernelBench snapshot this project uses.
DEGENERATE_H200 = {1: {4, 6, 19, 20, 23, 31, 32, 37, 39, 49, 53, 95, 99, 100},
                   2: {8, 9, 10, 23, 36, 38, 42, 44, 45, 49, 51, 56, 58, 64, 65, 66, 67, 80, 83, 89, 91, 96, 99},
                   3: {3, 5, 7, 11, 12, 18, 28, 35, 46, 47}}
PUBLISHED = {"eager": "score_default", "compile": "score_torch_compile_default", "cuda_graph": "score_cuda_graph",
             "compile_reduce_overhead": "score_torch_compile_reduce_overhead", "cudnn_benchmark": "score_cudnn"}


def good(s):
    """A measured speedup that can enter the statistics: a finite positive number."""
    return isinstance(s, (int, float)) and not isinstance(s, bool) and math.isfinite(s) and s > 0


def summarize(speedups):
    """Statistics of one method on one set of tasks. speedups: one entry per task, None for a failed task.

    A failure counts as 1.0x everywhere except mean_success (the mean over successful tasks only). Percentiles use
    linear interpolation between order statistics (numpy's default). An entry that is not a finite positive number
    counts as a failure. fast_p: share of all tasks with a speedup strictly greater than p (KernelBench).
    """
    ok = [float(s) for s in speedups if good(s)]
    n = len(speedups)
    padded = ok + [1.0] * (n - len(ok))
    out = dict(tasks=n, successes=len(ok), mean=None, mean_success=None, median=None, geomean=None, max=None,
               p25=None, p50=None, p75=None, count_gt_1_01=sum(s > 1.01 for s in ok))
    out.update({f"fast_{p}": (sum(s > p for s in ok) / n if n else None) for p in FAST_P})
    if n:
        p25, p50, p75 = np.percentile(padded, [25, 50, 75]).tolist()
        out.update(mean=sum(padded) / n, median=p50, geomean=math.exp(sum(map(math.log, padded)) / n),
                   max=max(padded), p25=p25, p50=p50, p75=p75)
    if ok:
        out["mean_success"] = sum(ok) / len(ok)
    return out


def per_sample(speedups):
    """Statistics over every answer of a model (not the best of N). speedups: one entry per answer (x), None for a
    failed one. Returns {samples, correct, mean (a failure counts as 0, RL's reward), se (its standard error,
    std / sqrt(n)), mean_ref (a failure counts as 1.0x: the reference kept)}; means None without samples."""
    n = len(speedups)
    zero = [float(s) if good(s) else 0.0 for s in speedups]
    out = dict(samples=n, correct=sum(good(s) for s in speedups), mean=None, se=None, mean_ref=None)
    if n:
        m = sum(zero) / n
        out.update(mean=m, se=(math.sqrt(sum((x - m) ** 2 for x in zero) / (n - 1) / n) if n > 1 else None),
                   mean_ref=sum(s if s > 0 else 1.0 for s in zero) / n)
    return out


# the paper's layout (CUDA-L1 Table 3: mean, max, 75%, 50%, 25%, successes, > 1.01x), then the extra statistics
COLUMNS = [("mean", "mean"), ("max", "max"), ("p75", "p75"), ("p50", "p50"), ("p25", "p25"), ("ok", "successes"),
           (">1.01x", "count_gt_1_01"), ("mean ok", "mean_success"), ("geomean", "geomean")] + \
          [(f"fast_{p}", f"fast_{p}") for p in FAST_P]


def markdown_table(entries):
    """The report: one row per (method, level) dict holding summarize()'s keys plus "method" and "level". Counts
    are printed out of the level's tasks ("249/250"), speedups (x) and fast_p shares with two decimals."""
    def fmt(k, e):
        v = e[k]
        return f"{v}/{e['tasks']}" if k in ("successes", "count_gt_1_01") else "-" if v is None else f"{v:.2f}"
    lines = ["| method | level | " + " | ".join(c for c, _ in COLUMNS) + " |", "|---|---|" + "---:|" * len(COLUMNS)]
    lines += [f"| {e['method']} | {e['level']} | " + " | ".join(fmt(k, e) for _, k in COLUMNS) + " |" for e in entries]
    return "\n".join(lines) + "\n"


def sample_table(by_task, methods):
    """Side by side, per task and over all: each method's correct answers and mean speedup per answer (failures as
    0), from by_task = {method: {task: [speedup or None per answer]}}. Returns (markdown, {method: per_sample(all)})."""
    names = sorted({n for m in methods for n in by_task[m]})
    head = "| task | " + " | ".join(f"{m}: correct | {m}: mean speedup" for m in methods) + " |"
    lines = [head, "|---|" + "---:|---:|" * len(methods)]
    cell = lambda s: f"{s['correct']}/{s['samples']} | " + ("-" if s["mean"] is None else f"{s['mean']:.2f}x")
    for n in names:
        lines.append(f"| {n} | " + " | ".join(cell(per_sample(by_task[m].get(n, []))) for m in methods) + " |")
    overall = {m: per_sample([s for n in names for s in by_task[m].get(n, [])]) for m in methods}
    lines.append("| all | " + " | ".join(cell(overall[m]) + (f" ± {overall[m]['se']:.2f}" if overall[m]["se"] else "")
                                         for m in methods) + " |")
    return "\n".join(lines) + "\n", overall


def degenerate_of(task, own_ref, screened):
    """(True | False | None, source) for one task row; see the module docstring for the order of the sources."""
    if task.get("degenerate") is not None:
        d = task["degenerate"]
        return (any(d.values()) if isinstance(d, dict) else bool(d)), "tasks_file"
    if task["name"] in screened:
        return screened[task["name"]], "bench.degenerate_screen"
    m = re.match(r"level([123])/(\d+)_", task["name"])
    if m and not own_ref:
        return int(m.group(2)) in DEGENERATE_H200[int(m.group(1))], "REFERENCE.md §3 (H200 scan)"
    return None, "unknown"


def kernel_mix(rows):
    """Of the correct kernels in rows: how many called a custom kernel in bench's first correctness trial
    (custom_kernel_calls > 0), how many are PyTorch-only (== 0), unknown (None: not counted by bench), and how many
    carry CUDA source at all (__global__ or load_inline in the code; a static hint, not proof that it ran)."""
    ok = [r for r in rows if r.get("success")]
    calls = [r.get("custom_kernel_calls") for r in ok]
    return dict(correct=len(ok), custom_ran=sum(c is not None and c > 0 for c in calls),
                pytorch_only=sum(c == 0 for c in calls), unknown=sum(c is None for c in calls),
                cuda_source=sum(bool(r.get("cuda_source")) for r in ok))


def hack_counts(rows):
    """{kind: count} of bench's named hacks over every sample of rows (sample_hacks, else the row's own hack)."""
    kinds = [h for r in rows for h in (r.get("sample_hacks") or [r.get("hack")]) if h]
    return dict(sorted(collections.Counter(kinds).items()))


def csv_header(methods, mains, pub_keys, ratios):
    """per_task.csv's column names, each once: task, level, degenerate; per method
    <method>_speedup, _status, _ms (the method's time; eager's is the reference's); per kernels/model method its
    hack, custom_kernel_calls, cuda_source, num_samples, num_correct; CUDA-L1's published scores; the ratios."""
    head = ["task", "level", "degenerate"] + [f"{m}_{c}" for m in methods for c in ("speedup", "status", "ms")]
    head += [f"{m}_{c}" for m in mains for c in ("hack", "custom_kernel_calls", "cuda_source", "num_samples",
                                                  "num_correct", "mean_sample_speedup")]
    head += [f"published_{k}" for k in pub_keys] + list(ratios)
    assert len(head) == len(set(head)), f"duplicate per_task.csv columns: {head}"
    return head


def write_csv(path, tasks, deg, rows, methods, mains, ratios):
    """per_task.csv: one line per selected task (columns: csv_header); empty = failed or not measured. ratios:
    {"kernels vs compile": {task: x}, ...}."""
    names = [t["name"] for t in tasks]
    pub_keys = sorted({k for n in names for m in mains for k in (rows.get((n, m), {}).get("published") or {})})
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(csv_header(methods, mains, pub_keys, ratios))
        for t in tasks:
            n = t["name"]
            line = [n, t["level"], deg[n]]
            for m in methods:
                r = rows.get((n, m)) or {}
                line += [r.get("speedup"), r.get("status"), r.get("ref_ms" if m == "eager" else "cand_ms")]
            for m in mains:
                r = rows.get((n, m)) or {}
                line += [r.get(k) for k in ("hack", "custom_kernel_calls", "cuda_source", "num_samples", "num_correct")]
                line.append(per_sample(r["sample_speedups"])["mean"] if r.get("sample_speedups") else None)
            pub = next((rows[(n, m)].get("published") for m in mains if rows.get((n, m), {}).get("published")), {})
            line += [pub.get(k) for k in pub_keys] + [v.get(n) for v in ratios.values()]
            w.writerow(["" if v is None else v for v in line])


def plot_sorted(spd, methods, levels_):
    """Figure: per level (and over all, when there is more than one level) each method's speedups sorted from the
    fastest task down, a failure at 1.0x; integer task ranks on x; log y only when the speedups span over 10x."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator, ScalarFormatter
    panels = [(lvl, ns) for lvl, ns in levels_ if lvl != "all" or len(levels_) > 2]  # "all" == the one level
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4), squeeze=False)
    for ax, (lvl, names) in zip(axes[0], panels):
        top = 1.0
        for m in methods:
            ys = sorted((spd[m][t] or 1.0 for t in names if t in spd[m]), reverse=True)
            ax.plot(range(1, len(ys) + 1), ys, label=m, marker="o" if len(ys) <= 30 else None, ms=4)
            top = max([top] + ys)
            low = min([1.0] + ys)
        if top / max(low, 1e-9) > 10:
            ax.set_yscale("log")
            ax.yaxis.set_major_formatter(ScalarFormatter())
        ax.axhline(1.0, color="gray", lw=0.5)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=8, min_n_ticks=1))
        ax.set(title=f"{lvl} ({len(names)} tasks)", xlabel="task rank (fastest first)", ylabel="speedup vs eager (x)")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    return fig


def plot(spd, methods, levels_, timed, rows, out_dir):
    """speedup_sorted.png (plot_sorted); speedup_vs_baselines.png: the kernels' speedup against each baseline's, or,
    with no kernels, each baseline's speedup against the eager time of the task (only when a baseline was timed)."""
    import matplotlib.pyplot as plt
    plot_sorted(spd, methods, levels_).savefig(os.path.join(out_dir, "speedup_sorted.png"), dpi=120)
    fig, axes = plt.subplots(1, max(1, len(timed)), figsize=(4.5 * max(1, len(timed)), 4), squeeze=False)
    for ax, b in zip(axes[0], timed):  # one point per task where both succeeded; above the diagonal = kernel faster
        if methods[0] in PUBLISHED:  # no kernels: the first method is a baseline
            pts = [((rows.get((t, "eager")) or {}).get("ref_ms"), s) for t, s in spd[b].items() if s]
            pts = [p for p in pts if p[0]]
            ax.axhline(1, color="gray", lw=0.5)
            ax.set(xlabel="eager time (ms)", ylabel=f"{b} speedup (x)")
        else:
            pts = [(spd[b][t], k) for t, k in spd[methods[0]].items() if k and spd[b].get(t)]
            ax.axline((1, 1), slope=1, color="gray", lw=0.5)
            ax.set(xlabel=f"{b} speedup (x)", ylabel=f"{methods[0]} speedup (x)")
        if pts:
            ax.scatter(*zip(*pts), s=10)
        ax.set(xscale="log", yscale="log")
    if timed:
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, "speedup_vs_baselines.png"), dpi=120)
    plt.close("all")


def versions(rows, runs):
    """{device_name, torch_version, cuda_version, triton_version, ...} for the report header: from bench's records
    (the processes that measured), else from the measuring runs (this_run), so that a run stopped before
    its first measurement still names the real versions. CUDA "none" = a CPU-only torch."""
    env = next(({k: r.get(k) for k in ("device_name", "torch_version", "cuda_version", "protocol")}
                for r in rows.values() if r.get("device_name") and r.get("torch_version")), {})
    last = runs[-1] if runs else {}
    for k in ("torch_version", "cuda_version", "triton_version", "git_commit", "date_utc"):
        env[k] = env.get(k) or last.get(k)
    env["commands"] = [r["command"] for r in runs]
    return env


def this_run():
    """What this invocation is: command, date, commit, torch / CUDA / Triton versions (bench's records add the GPU). A
    measuring run appends it to runs.jsonl, so a table measured over several calls names them all."""
    import torch
    run = dict(command="python evaluate.py " + " ".join(shlex.quote(a) for a in sys.argv[1:]),
               date_utc=time.strftime("%Y-%m-%d %H:%M", time.gmtime()), git_commit=None,
               torch_version=torch.__version__, cuda_version=torch.version.cuda, triton_version=None)
    try:
        import triton
        run["triton_version"] = triton.__version__
    except Exception:
        pass
    try:
        def git(*args):
            return subprocess.run(["git", *args], cwd=common.ROOT, capture_output=True, text=True, timeout=10).stdout
        run["git_commit"] = (git("rev-parse", "--short", "HEAD").strip()
                             + ("-dirty" if git("status", "--porcelain", "-uno").strip() else ""))
    except Exception:
        pass
    return run


def write_report(out_dir, rows, tasks, mains, baselines, unavailable, own_ref, runs, config, elapsed_s):
    """summary.md (also printed), summary.json, per_task.csv and the plots of one evaluation.

    rows: {(task, method): results.jsonl row}; tasks: the selected task rows; mains: [(method, source)] of the
    kernels or models (empty for baselines only); baselines: the baselines asked for; unavailable: {baseline: why};
    own_ref: tasks timed against a reference of their own; runs: the measuring runs (runs.jsonl); config: the
    settings. A run stopped early still reports every method over the tasks it has rows for ("measured" are the
    tasks every method has a row for, and each method's table counts only its own tasks).
    """
    names = [t["name"] for t in tasks]
    screened = {t: r.get("degenerate") for (t, m), r in rows.items() if m == "screen"}
    deg, deg_src = {}, collections.Counter()
    for t in tasks:
        deg[t["name"]], s = degenerate_of(t, t["name"] in own_ref, screened)
        deg_src[s] += 1
    main_methods = [m for m, _ in mains]
    timed = [b for b in baselines if b != "eager" and b not in unavailable]
    methods = main_methods + [b for b in baselines if b not in unavailable]
    have = {m: [n for n in names if (n, m) in rows] for m in methods}
    measured = [n for n in names if all((n, m) in rows for m in methods)]
    missing = [n for n in names if n not in measured]
    reported = [n for n in names if any((n, m) in rows for m in methods)]
    spd = {m: {n: rows[(n, m)]["speedup"] for n in have[m]} for m in methods}
    table_methods = list(methods)
    for k in main_methods:
        for b in timed:  # kernel over baseline, task by task, where both have a row; eager where the baseline failed
            spd[f"{k} vs {b}"] = {n: (s / spd[b][n] if spd[b][n] else s) if s else None
                                  for n, s in spd[k].items() if n in spd[b]}
            table_methods.append(f"{k} vs {b}")
        pub = {n: rows[(n, k)].get("published") or {} for n in have[k]}
        for b, key in PUBLISHED.items() if any(pub.values()) else ():  # CUDA-L1's own numbers, for comparison only
            if b == "eager" or b in baselines:
                m = "published" + (f" vs {b}" if b != "eager" else "")
                spd[m] = {n: p[key] if good(p.get(key)) else None for n, p in pub.items()}
                table_methods.append(m)
    level_by_name = {t["name"]: t["level"] for t in tasks}
    by_level = [(f"level{L}", [n for n in reported if level_by_name[n] == L])
                for L in sorted({level_by_name[n] for n in reported}, key=str)]
    by_level.append(("all", reported))
    env = versions(rows, runs)
    device, protocol = config.get("device"), config.get("protocol")
    tables = {}
    unknown_deg = [n for n in reported if deg[n] is None]
    variants = [("all tasks", lambda n: True)]
    if not unknown_deg:
        variants.append(("without degenerate tasks", lambda n: not deg[n]))
    for title, keep in variants:
        tables[title] = [dict(method=m, level=lvl, **summarize([spd[m][n] for n in ns if keep(n) and n in spd[m]]))
                         for m in table_methods for lvl, ns in by_level]
    text = (f"speedup = t_eager / t_method (x); in the per-task tables a failed task counts as 1.0x (eager) except in "
            f"'mean ok', in the per-answer line a failed answer as 0; ok and >1.01x are "
            f"counts of tasks; fast_p = share of all tasks correct with speedup > p. Device "
            f"{env.get('device_name') or device}, "
            f"torch {env.get('torch_version')}, CUDA {env.get('cuda_version') or 'none'}, Triton "
            f"{env.get('triton_version') or 'none'}, protocol {protocol}, atol {config.get('atol')}, rtol "
            f"{config.get('rtol')}, commit {env.get('git_commit')}, {env.get('date_utc')} UTC.\n"
            + "".join(f"Command: `{c}`\n" for c in dict.fromkeys(env["commands"]))
            + f"\nMeasured {len(measured)} of {len(names)} selected tasks"
            + (f"; missing ({len(missing)}): {', '.join(missing[:40])}{' ...' if len(missing) > 40 else ''}"
               if missing else "")
            + "".join(f"\n- {m}: {len(have[m])} of {len(names)} tasks" + (f", missing {len(names) - len(have[m])}" if
                      len(have[m]) < len(names) else "") for m in methods if missing)
            + ("\nEach table row counts only the tasks its method has rows for ('K vs B': both); the run is partial"
               if missing else "")
            + f".\nDegenerate tasks (REFERENCE.md §3): {sum(bool(deg[n]) for n in reported)} of the "
            + ("reported" if missing else "measured") + "; sources: "
            + ", ".join(f"{s} {c}" for s, c in deg_src.items()) + ".\n")
    sampled_any = any(rows[(n, m)].get("sample_speedups") and len(rows[(n, m)]["sample_speedups"]) > 1
                      for m in main_methods if m != "kernels" for n in have[m])
    if sampled_any:   # a reader reads the first table first: say what best of N hides
        text += ("\nThe tables below take each task's best answer of N (the paper's layout): one lucky sample decides "
                 "them, so a model that writes more kinds of kernel can lead there while most of its answers are "
                 "slower (RL narrows a model); the 'per sample' table further down counts every answer.\n")
    for title, entries in tables.items():
        text += f"\n### {title}\n\n" + markdown_table(entries)
    if unknown_deg:
        text += (f"\n### without degenerate tasks\n\nnot computed: {len(unknown_deg)} of the {len(reported)} reported "
                 f"tasks have no degenerate status (no tasks_file field, no screen, not a KernelBench L1-L3 name; "
                 f"prepare.py's screen or --screen_degenerate=True gives them one): {', '.join(unknown_deg[:10])}\n")
    text += "".join(f"\n- {b}: unavailable ({why})" for b, why in unavailable.items())
    sampled = [m for m in main_methods if m != "kernels" and any(rows[(n, m)].get("sample_speedups") for n in have[m])]
    overall = {}
    if sampled:
        by_task = {m: {n: rows[(n, m)].get("sample_speedups") or [] for n in have[m]} for m in sampled}
        table, overall = sample_table(by_task, sampled)
        text += ("\n\n### per sample: every answer, not the best of N\n\nmean speedup = t_eager / t_answer over all "
                 "answers, a failed answer counted as 0 (RL's reward), ± its standard error; the same prompts for "
                 "every model, each distinct kernel timed once (so a kernel two models both wrote has one time)"
                 "\n\n" + table)
        if len(sampled) > 1:
            text += ("\nmean speedup per answer (failures as 0): " + ", ".join(
                f"{m} {overall[m]['mean']:.2f}x" for m in sampled if overall[m]["mean"] is not None) + "\n")
    mix, hacks = {}, {m: hack_counts([rows[(n, m)] for n in have[m]]) for m in methods}
    for k in main_methods:
        mix[k] = {lvl: kernel_mix([rows[(n, k)] for n in ns if (n, k) in rows]) for lvl, ns in by_level}
        text += ("\n\n### what the correct kernels " + (f"of {k} " if len(mains) > 1 else "") + "are (bench's "
                 "custom_kernel_calls in the first correctness trial; counts of tasks)\n\n| level | correct tasks | "
                 "custom kernel ran | PyTorch only | unknown | CUDA in source | share custom |\n"
                 "|---|---:|---:|---:|---:|---:|---:|\n"
                 + "".join(f"| {lvl} | {x['correct']} | {x['custom_ran']} | {x['pytorch_only']} | {x['unknown']} | "
                           f"{x['cuda_source']} | {x['custom_ran'] / x['correct'] if x['correct'] else 0:.0%} |\n"
                           for lvl, x in mix[k].items()))
    text += "\n\nhacks named by bench, by kind: " + ("; ".join(f"{m}: " + ", ".join(f"{k} {v}" for k, v in h.items())
                                                             for m, h in hacks.items() if h) or "none") + "\n"
    print("\n" + text)
    title = ", ".join(f"{m} = {s}" for m, s in mains) or "baselines"
    with open(os.path.join(out_dir, "summary.md"), "w") as f:
        f.write(f"# Evaluation: {title}\n\n{text}")
    common.write_json_atomic(os.path.join(out_dir, "summary.json"), dict(
        config=config, env=env, unavailable=unavailable, measured=len(measured), missing=missing,
        measured_by_method={m: len(have[m]) for m in methods},
        degenerate={n: deg[n] for n in names}, tables=tables, per_sample=overall, kernel_mix=mix, hacks=hacks,
        elapsed_s=round(elapsed_s, 1)))
    write_csv(os.path.join(out_dir, "per_task.csv"), tasks, deg, rows, methods, main_methods,
              {m: spd[m] for m in table_methods if " vs " in m})
    if not measured:  # an interrupted run may have no row yet: nothing to draw
        print("no plots: no task has rows for every method yet")
        return
    try:
        plot(spd, methods, by_level, timed, rows, out_dir)
    except Exception as e:  # a plot is never worth losing the run
        print(f"plotting failed: {type(e).__name__}: {e}")
