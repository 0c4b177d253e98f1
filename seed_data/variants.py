"""
The project-written kernels of a task set (variants_dir/<task stem>/*.py, each with its expected verdict): measured
with bench.py as seed kernels, then turned into contrastive SFT rows that teach the answer format.
"""
import glob
import hashlib
import itertools
import os
import sys
import threading

import common
import prompting


def result_line(res):
    """record.summary of a result, with the error as common.error_line gives it (never an empty "log tail:")."""
    from harness import record
    return record.summary(dict(res, error=common.error_line(res)))


def measure_variants(tasks, variants_dir, journal_path, bench_kw):
    """Seed rows {task, variant, code, expect, design, analysis, result, correct, speedup (x)} of every kernel under
    variants_dir/<task stem>/*.py, each measured by bench.evaluate_many with bench_kw (device, arch, ...). Each
    result is appended to journal_path as it comes, so a rerun after an interrupt measures only the kernels that
    file lacks; the caller deletes it once the seeds are saved. Exits with an error when there is no kernel."""
    import bench
    jobs, meta = [], []
    for task in tasks:
        stem = task["name"].split("/")[-1]
        for path in sorted(glob.glob(os.path.join(variants_dir, stem, "*.py"))):
            code, labels = prompting.parse_variant(open(path).read())
            jobs.append((task["name"], task["src"], code))
            meta.append(dict(task=task["name"], variant=os.path.basename(path)[:-3], code=code,
                             expect=labels.get("expect", "correct"), design=labels.get("design", ""),
                             analysis=labels.get("analysis", "")))
    if not jobs:
        sys.exit(f"error: no kernels under {variants_dir}/<task stem>/*.py for the {len(tasks)} tasks "
                 f"({', '.join(t['name'] for t in tasks[:3])}...); check --variants_dir")

    def key(job):
        return f"{job[0]}|{hashlib.sha256(job[2].encode()).hexdigest()[:16]}|{bench_kw['device']}"
    done = {r["key"]: r["result"] for r in common.read_appended(journal_path) if {"key", "result"} <= set(r)}
    todo = [j for j in jobs if key(j) not in done]
    if len(todo) < len(jobs):
        print(f"reusing {len(jobs) - len(todo)} of {len(jobs)} kernels measured by an interrupted run ({journal_path})")
    lock = threading.Lock()

    def keep(i, res):  # as each kernel is measured (bench's worker thread)
        with lock:
            done[key(todo[i])] = res
            common.append_jsonl(journal_path, dict(key=key(todo[i]), result=res))
    if todo:
        results = bench.evaluate_many(todo, progress=True, on_result=keep, **bench_kw)
        for job, res in zip(todo, results):
            done.setdefault(key(job), res)
    rows, shown = [], {key(j) for j in todo}      # bench printed these in full as they were measured
    for labels, job in zip(meta, jobs):
        res = done[key(job)]
        rows.append(dict(labels, result=res, correct=bool(res["correct"]), speedup=res.get("speedup")))
        short = f"ok {res['speedup']:.2f}x" if res["status"] == "ok" and res.get("speedup") else \
            res["status"] + (f" ({res['hack']})" if res.get("hack") else "")
        verdict = short if key(job) in shown else result_line(res)
        surprise = "" if bool(res["correct"]) == (labels["expect"] == "correct") else f"  (expected {labels['expect']})"
        print(f"  {labels['task']:<28} {labels['variant']:<28} expect={labels['expect']:<8} {verdict}{surprise}")
    return rows


def sft_rows(tasks, seeds, rng, prompts_per_variant, gpu_name):
    """SFT rows {task, source, prompt, response}: each project-written kernel (right or wrong) as the answer to
    prompts_per_variant contrastive prompts whose two exemplars are measured-correct kernels of the task, so the model
    learns the stage-3 format and has no preference yet: which kernel is fast is left for RL to find out from the
    timings. Every kernel gets the pairs of exemplars in turn (each pair as often, in a shuffled order), not pairs
    drawn at random: with random pairs some pair never leads to some kernel, the SFT model then never writes it after
    that pair, and RL, whose prompts show the fastest kernel most often (bucket sampling), could not find it."""
    rows = []
    for task in tasks:
        mine = [s for s in seeds if s["task"] == task["name"]]
        good = [s for s in mine if s["correct"]]
        pairs = [list(p) for p in itertools.combinations(good, prompting.NUM_EXEMPLARS)] or [good]
        for seed_row in mine:
            order = rng.sample(pairs, len(pairs))
            for i in range(prompts_per_variant):
                exemplars = order[i % len(order)]
                prompt = prompting.contrastive_prompt(task["src"], [(e["code"], e["speedup"]) for e in exemplars],
                                                      gpu_name)
                response = prompting.format_response(seed_row["analysis"] or "-", seed_row["design"] or "-",
                                                     seed_row["code"])
                rows.append(dict(task=task["name"], source=f"variant:{seed_row['variant']}", prompt=prompt,
                                 response=response))
    rng.shuffle(rows)
    return rows
