"""
Stage 0: the task set, the seed kernels and the stage-1 SFT data.

    python prepare.py --kernelbench_dir=../shared/kernelbench --levels=1,2,3      # the task set only
    python prepare.py --preset=tiny                                                # + measured seed kernels and SFT data

Writes to out_dir:
  tasks.jsonl  one row per task: name ("level1/25_Swish"), level, file, src, split ("train" or "eval")
  seed.jsonl   (with variants_dir) every project-written kernel with its measured bench.py result
  db.json      (with variants_dir) the exemplar database rl.py starts from: {task: [{code, speedup, step, source}]}
  sft.jsonl    (with variants_dir) (prompt, response) pairs for sft.py
The KernelBench files are read from a local folder (../shared/kernelbench here) or, with --download=True,
fetched from the KernelBench GitHub repository with the standard library; they are never copied into the repo.

Split: "heldout" (default) puts a task in "eval" when a hash of its name falls in the last eval_fraction, which
is deterministic and stable as tasks are added; "paper" trains and evaluates on all tasks, as CUDA-L1 did
(REFERENCE.md §1.5: no train/test split).
"""
import ast
import glob
import hashlib
import io
import os
import random
import sys
import tarfile
import urllib.request

import common

# -----------------------------------------------------------------------------
# config
kernelbench_dir = os.environ.get("KERNELBENCH_DIR") or os.path.join(common.ROOT, "..", "shared", "kernelbench")
download = False  # fetch KernelBench from GitHub when kernelbench_dir does not exist
kernelbench_url = "https://github.com/ScalingIntelligence/KernelBench/archive/refs/heads/main.tar.gz"
levels = "1,2,3"
task_names = ""  # comma list of "level1/25_Swish"-style names; empty = every task of the levels
split = "heldout"  # heldout | paper
eval_fraction = 0.2
out_dir = "out"
variants_dir = ""  # project-written kernels, <variants_dir>/<task stem>/*.py, measured and used as seeds + SFT data
sft_prompts_per_variant = 4  # SFT rows per kernel, each with a different random pair of exemplars in the prompt
device = "cuda"
gpu = "h200"
arch = "9.0"
gpu_name = "NVIDIA H200"
num_correct_trials = 5
time_budget_s = 2.0
timeout_s = 300.0
build_workers = 0  # 0 = one per CPU core
seed = 1337
# -----------------------------------------------------------------------------


def split_of(name, frac):
    """Deterministic held-out split: hash of the task name, so adding tasks never moves existing ones."""
    h = int(hashlib.sha256(name.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return "eval" if h >= 1.0 - frac else "train"


def check_task(path, src):
    """Raise ValueError unless src is a KernelBench task: parses, defines Model, get_inputs, get_init_inputs."""
    try:
        tree = ast.parse(src)
    except SyntaxError as e:
        raise ValueError(f"{path}: not valid Python ({e})") from None
    names = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    missing = {"Model", "get_inputs", "get_init_inputs"} - names
    if missing:
        raise ValueError(f"{path}: not a KernelBench task, missing {', '.join(sorted(missing))}")


def fetch_kernelbench(dest):
    """Download the KernelBench repository tarball and unpack its KernelBench/level*/ task files into dest."""
    print(f"downloading {kernelbench_url} ...")
    try:
        data = urllib.request.urlopen(kernelbench_url, timeout=120).read()
    except OSError as e:
        sys.exit(f"error: cannot download KernelBench ({e}); pass --kernelbench_dir=PATH to a local copy")
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        for m in tar.getmembers():
            parts = m.name.split("/")
            if m.isfile() and len(parts) == 4 and parts[1] == "KernelBench" and parts[2].startswith("level"):
                os.makedirs(os.path.join(dest, parts[2]), exist_ok=True)
                with open(os.path.join(dest, parts[2], parts[3]), "wb") as f:
                    f.write(tar.extractfile(m).read())


def load_tasks(root, level_list, names):
    """Task rows from a KernelBench folder (level1/, level2/, ... inside) or a flat folder of task files (level 0,
    names "<folder>/<stem>", used for the project-written CPU tasks). Raises ValueError for a bad folder or file."""
    if not os.path.isdir(root):
        raise ValueError(f"task folder {root!r} does not exist")
    files = []
    if any(os.path.isdir(os.path.join(root, f"level{L}")) for L in level_list):
        for L in level_list:
            files += [(L, p, f"level{L}/{os.path.basename(p)[:-3]}")
                      for p in sorted(glob.glob(os.path.join(root, f"level{L}", "*.py")))]
    else:
        base = os.path.basename(os.path.normpath(root))
        files = [(0, p, f"{base}/{os.path.basename(p)[:-3]}") for p in sorted(glob.glob(os.path.join(root, "*.py")))]
    if names:
        want = set(names)
        files = [f for f in files if f[2] in want]
        missing = want - {f[2] for f in files}
        if missing:
            raise ValueError(f"tasks not found in {root}: {', '.join(sorted(missing))}")
    if not files:
        raise ValueError(f"no task files in {root!r} for levels {level_list}")
    rows = []
    for L, path, name in files:
        src = open(path).read()
        check_task(path, src)
        rows.append(dict(name=name, level=L, file=os.path.abspath(path), src=src))
    return rows


def measure_variants(tasks):
    """Measure every project-written kernel of every task with bench.py; returns seed rows."""
    import bench
    jobs, meta = [], []
    for t in tasks:
        stem = t["name"].split("/")[-1]
        for path in sorted(glob.glob(os.path.join(variants_dir, stem, "*.py"))):
            code, m = common.parse_variant(open(path).read())
            jobs.append((t["name"], t["src"], code))
            meta.append(dict(task=t["name"], variant=os.path.basename(path)[:-3], code=code,
                             expect=m.get("expect", "correct"), design=m.get("design", ""),
                             analysis=m.get("analysis", "")))
    assert jobs, f"no kernels found under {variants_dir}/<task stem>/"
    results = bench.evaluate_many(jobs, device=device, arch=arch or None, num_correct_trials=num_correct_trials,
                                  time_budget_s=time_budget_s, timeout_s=timeout_s,
                                  build_workers=build_workers or None, progress=True)
    rows = []
    for m, r in zip(meta, results):
        rows.append(dict(m, result=r, correct=bool(r["correct"]), speedup=r.get("speedup")))
        print(f"  {m['task']:<28} {m['variant']:<28} expect={m['expect']:<8} {bench.result_summary(r)}")
    return rows


def sft_rows(tasks, seeds, rng):
    """SFT pairs: each project-written kernel (right or wrong) as the answer to contrastive prompts whose two
    exemplars are other measured-correct kernels of the task, so the model learns the stage-3 format and has no
    preference yet: which kernel is fast is left for RL to find out from the timings."""
    rows = []
    for t in tasks:
        mine = [s for s in seeds if s["task"] == t["name"]]
        good = [s for s in mine if s["correct"]]
        for s in mine:
            for _ in range(sft_prompts_per_variant):
                ex = rng.sample(good, 2) if len(good) >= 2 else good
                prompt = common.contrastive_prompt(t["src"], [(e["code"], e["speedup"]) for e in ex], gpu_name)
                response = common.format_response(s["analysis"] or "-", s["design"] or "-", s["code"])
                rows.append(dict(task=t["name"], source=f"variant:{s['variant']}", prompt=prompt, response=response))
    rng.shuffle(rows)
    return rows


if __name__ == "__main__":
    common.configure(globals())
    if variants_dir:
        common.check_device(device)
    rng = random.Random(seed)
    os.makedirs(out_dir, exist_ok=True)
    if not os.path.isdir(kernelbench_dir):
        if not download:
            sys.exit(f"error: task folder {kernelbench_dir!r} not found; pass --kernelbench_dir=PATH or --download=True")
        kernelbench_dir = os.path.join(out_dir, "kernelbench")
        fetch_kernelbench(kernelbench_dir)
    try:
        tasks = load_tasks(kernelbench_dir, [int(x) for x in str(levels).split(",") if x],
                           [n for n in task_names.split(",") if n])
    except ValueError as e:
        sys.exit(f"error: {e}")
    for t in tasks:
        t["split"] = "train" if split == "paper" else split_of(t["name"], eval_fraction)
    with open(os.path.join(out_dir, "tasks.jsonl"), "w") as f:
        for t in tasks:
            f.write(common.json.dumps(t) + "\n")
    n_eval = sum(t["split"] == "eval" for t in tasks)
    print(f"{len(tasks)} tasks ({len(tasks) - n_eval} train, {n_eval} eval) -> {out_dir}/tasks.jsonl")

    if variants_dir:
        seeds = measure_variants(tasks)
        with open(os.path.join(out_dir, "seed.jsonl"), "w") as f:
            for s in seeds:
                f.write(common.json.dumps(s) + "\n")
        wrong = [s for s in seeds if (s["expect"] == "correct") != s["correct"]]
        for s in wrong:
            print(f"error: {s['task']} {s['variant']} is labelled {s['expect']} but bench.py says "
                  f"{s['result']['status']}: {s['result']['error'][:300]}")
        if wrong:  # no db.json / sft.jsonl from a broken measurement: a rerun must measure again
            sys.exit(f"error: {len(wrong)} of {len(seeds)} seed kernels were not judged as labelled "
                     f"(results in {out_dir}/seed.jsonl); is the GPU, nvcc and CUDA_HOME set up?")
        db = {t["name"]: [dict(code=s["code"], speedup=s["speedup"], step=-1, source=f"variant:{s['variant']}")
                          for s in seeds if s["task"] == t["name"] and s["correct"]] for t in tasks}
        common.write_json_atomic(os.path.join(out_dir, "db.json"), db)
        rows = sft_rows(tasks, seeds, rng)
        with open(os.path.join(out_dir, "sft.jsonl"), "w") as f:
            for r in rows:
                f.write(common.json.dumps(r) + "\n")
        print(f"{len(seeds)} seed kernels ({sum(s['correct'] for s in seeds)} correct), {len(rows)} SFT rows -> {out_dir}")
