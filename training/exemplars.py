"""The exemplar database of CUDA-L1 §3 (REFERENCE.md §1.3): every correct kernel of each task with its speedup, from
which each contrastive prompt draws its exemplars by bucket sampling, and the result cache of measured kernels."""
import hashlib
import math
import os

import common


def kernel_key(task, code):
    """The result cache's key of a kernel: 16 hex digits of sha256 over (task, code)."""
    return hashlib.sha256("\0".join((task, code)).encode()).hexdigest()[:16]


def sample_exemplars(entries, n, rng, method="bucket", width=0.25, temp=1.0):
    """Pick n kernels from a task's database entries [{code, speedup, ...}] for the contrastive prompt.

    bucket (CUDA-L1 §3): group kernels into speedup buckets of width `width` (x); choose n distinct buckets with
    P(B_i) proportional to exp((mean_i - mu) / temp), mu = mean of the bucket means, drawn without replacement;
    one kernel uniformly inside each chosen bucket. Fallbacks (not in the paper): with n or fewer kernels all are
    used (a task with none gets the contrastive prompt without exemplars until RL finds a correct kernel);
    with fewer buckets than n, one kernel from each bucket and the rest uniformly from the remaining kernels.
    random: n distinct kernels uniformly (the paper's "random" ablation).
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
        # exp((m - top) / temp) is exp((m - mu) / temp) times a constant: the same probabilities without overflow
        # for widely spread buckets at a low temp (1x and 1000x at temp=0.01), and the largest weight is 1
        i = rng.choices(left, weights=[math.exp((means[j] - top) / temp) for j in left])[0]
        chosen.append(rng.choice(buckets[keys[i]]))
        left.remove(i)
    return chosen


def add_kernels(db, found, step):
    """Put every new correct kernel of `found` [{task, code, speedup}] into db, in order; a known source is skipped."""
    for e in found:
        if all(x["code"] != e["code"] for x in db[e["task"]]):
            db[e["task"]].append(dict(code=e["code"], speedup=e["speedup"], step=step, source="rl"))


def load_database(out_dir, task_names):
    """The cold-start exemplar database and result cache from what the earlier stages measured.

    Database: {task: [{code, speedup (x), step, source}]} of every *successful* kernel: out_dir/db.json (written by
    prepare.py) and the correct rows of out_dir/seed.jsonl (prepare's measured seed kernels, plus any imported
    collection such as CUDA-L1's release, same row format: task, code, correct, speedup, result, variant/source),
    each kernel once; step = -1 for all of them (before RL). Cache: {kernel_key(task, code): bench result} of every seed
    row, so RL never re-times a kernel prepare.py already measured on this GPU.
    """
    db, cache = {n: [] for n in task_names}, {}

    def add(task, code, speedup, step, source):
        if task in db and speedup is not None and all(e["code"] != code for e in db[task]):
            db[task].append(dict(code=code, speedup=speedup, step=step, source=source))
    if os.path.exists(os.path.join(out_dir, "db.json")):
        for task, entries in common.json.load(open(os.path.join(out_dir, "db.json"))).items():
            for e in entries:
                add(task, e["code"], e["speedup"], e.get("step", -1), e.get("source", "db.json"))
    if os.path.exists(os.path.join(out_dir, "seed.jsonl")):
        for r in common.read_jsonl(os.path.join(out_dir, "seed.jsonl")):
            cache[kernel_key(r["task"], r["code"])] = r["result"]
            if r.get("correct"):
                add(r["task"], r["code"], r.get("speedup") or r["result"].get("speedup"), -1,
                    r.get("source") or f"variant:{r.get('variant', '?')}")
    return db, cache
