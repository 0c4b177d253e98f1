"""
Stage 0: the task set, the seed kernels and the SFT data that the other stages start from.

    python prepare.py --kernelbench_dir=../shared/kernelbench --levels=1,2,3   # the task set only
    python prepare.py --download=True                                         # the same, KernelBench from GitHub
    python prepare.py --preset=tiny                                           # + measured seed kernels and SFT data
    python prepare.py --teachers=openai:gpt-4o,hf:Qwen/Qwen2.5-Coder-7B-Instruct --teacher_tries=20   # stage-1 data
    python prepare.py --import_kernels=../shared/cudal1_sample/a100_sample.jsonl                     # + imports

Steps: 1. the task set: KernelBench's level folders (or a flat folder of task files, level 0), read in place or
fetched with --download=True into out_dir, never copied into the repository; each task gets its split. 2. the
screen (on for CUDA; evaluation/screen.py): which trivial outputs pass each task's check (REFERENCE.md §3) and the
eager reference's time, cached in screen.jsonl. 3. tasks.jsonl, one row per task (name, level, file, src, split,
degenerate, degenerate_passed, ref_ms). 4. the seed kernels, each verified by bench.py on this device: the
project-written kernels of variants_dir and their SFT rows (seed_data/variants.py), imported kernel files
(seed_data/imports.py, report in import_report.jsonl), teacher LLMs (seed_data/teachers.py, files in teacher/);
imports and teachers use training tasks only.
5. seed.jsonl (every kernel with its bench result), db.json (rl.py's exemplars, {task: [{code, speedup, step,
source}]}) and sft.jsonl (sft.py's rows, every source mixed). Measurements are appended as they come
(seed.partial.jsonl, teacher/*.jsonl): a rerun after Ctrl-C or SIGTERM measures only what is missing.

Departures from CUDA-L1 (REFERENCE.md §1.1, §1.5):
  - split=heldout (default) keeps a hash-chosen eval_fraction of tasks unseen; CUDA-L1 trained on all (split=paper).
  - SFT rows may also come from project-written kernels (answering the contrastive prompt) and imported kernels.
"""
import hashlib
import json
import os
import random
import sys

import torch

import common
from evaluation import screen
from evaluation import taskset
import seed_data.imports
import seed_data.teachers
import seed_data.variants

# -----------------------------------------------------------------------------
# config
kernelbench_dir = ""  # KernelBench's tasks; "" = $KERNELBENCH_DIR or shared/kernelbench beside the checkout
download = False  # fetch KernelBench from GitHub when kernelbench_dir does not exist
kernelbench_url = "https://github.com/ScalingIntelligence/KernelBench/archive/refs/heads/main.tar.gz"  # for download
levels = "1,2,3"  # KernelBench levels of the task set
task_names = ""  # comma list of "level1/25_Swish"-style names; empty = every task of the levels
split = "heldout"  # heldout | paper
eval_fraction = 0.2  # share of the tasks held out for evaluation (split=heldout)
out_dir = "out"  # the run folder the other stages read
variants_dir = ""  # project-written kernels (<task stem>/*.py): measured seeds + SFT data
sft_prompts_per_variant = 4  # SFT rows per kernel; the pairs of exemplars in its prompts go round all pairs
device = "cuda" if torch.cuda.is_available() else "cpu"  # where kernels run: cuda if torch sees a GPU, else cpu
gpu = "h200"  # --gpu=NAME sets device, arch and gpu_name from common.GPU_PRESETS
arch = "9.0"  # TORCH_CUDA_ARCH_LIST for nvcc
gpu_name = "NVIDIA H200"  # the GPU the prompts name
num_correct_trials = 5  # bench's correctness trials per kernel
time_budget_s = 2.0  # bench: seconds the timed calls of one kernel should take
timeout_s = 300.0  # bench: per kernel, build included, s
build_workers = 0  # 0 = one per CPU core
seed = 1337  # exemplar pairs and the order of the SFT rows
screen_degenerate = "auto"  # auto (on for CUDA) | True | False: degeneracy screen and ref_ms per task
# stage-1 data from teachers
teachers = ""  # comma list of hf:<HF name or folder> | openai:<model>
teacher_tries = 20  # K: answers per teacher and task (CUDA-L1: up to 20)
teacher_keep = 2  # M: distinct verified kernels kept per teacher and task (CUDA-L1: at most 2)
teacher_batch = 4  # tries per task generated and verified together (a teacher stops a task at M)
teacher_temperature = 1.0  # sampling temperature of the teachers
teacher_max_new_tokens = 8192  # longest teacher answer, in tokens
teacher_concurrency = 8  # parallel requests to an OpenAI-compatible endpoint
teacher_retries = 4  # per request, on connection errors, HTTP 429 and 5xx, waiting 1, 2, 4... s
teacher_http_timeout_s = 600.0  # per request to an endpoint, s
# import of existing kernels
import_kernels = ""  # comma list of files: CUDA-L1 release JSONL, {task, code} JSONL, rl.py's db.json
# -----------------------------------------------------------------------------


def split_of(name, frac):
    """Deterministic held-out split: hash of the task name, so adding tasks never moves existing ones."""
    share = int(hashlib.sha256(name.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return "eval" if share >= 1.0 - frac else "train"


def write_jsonl(path, rows):
    """Write rows as JSON lines, replacing the file."""
    with open(path, "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    common.exit_on_interrupt()
    common.configure(globals())
    if split not in ("heldout", "paper"):
        sys.exit(f"error: --split must be heldout or paper, not {split!r}")
    rng = random.Random(seed)

    # ---- the task set (its folder's error first: on a CPU machine a device error would hide it)
    kernelbench_dir = kernelbench_dir or taskset.KERNELBENCH_DEFAULT
    if not os.path.isdir(kernelbench_dir):
        if not download:
            sys.exit(f"error: KernelBench folder {kernelbench_dir!r} not found; pass --kernelbench_dir=PATH to its "
                     "tasks, or --download=True to fetch them from GitHub")
        kernelbench_dir = os.path.join(out_dir, "kernelbench")
        try:
            taskset.download_kernelbench(kernelbench_url, kernelbench_dir)
        except RuntimeError as e:
            sys.exit(f"error: {e}")
    try:
        tasks = taskset.load_tasks(kernelbench_dir, [int(x) for x in str(levels).split(",") if x],
                                   [n for n in task_names.split(",") if n])
    except ValueError as e:
        sys.exit(f"error: {e}")
    screening = screen_degenerate == "True" or (screen_degenerate == "auto" and device.startswith("cuda"))
    if variants_dir or teachers or import_kernels or screening:
        common.check_device(device)
    os.makedirs(out_dir, exist_ok=True)
    for t in tasks:
        t["split"] = "train" if split == "paper" else split_of(t["name"], eval_fraction)
    bench_kw = dict(device=device, arch=arch or None, num_correct_trials=num_correct_trials,
                    time_budget_s=time_budget_s, timeout_s=timeout_s, build_workers=build_workers or None)
    if screening:
        screen.screen_tasks(tasks, os.path.join(out_dir, "screen.jsonl"), bench_kw)
    write_jsonl(os.path.join(out_dir, "tasks.jsonl"), tasks)
    n_eval = sum(t["split"] == "eval" for t in tasks)
    print(f"{len(tasks)} tasks ({len(tasks) - n_eval} train, {n_eval} eval) -> {out_dir}/tasks.jsonl")

    # ---- the seed kernels and SFT rows of every source
    seeds, rows = [], []
    journal = os.path.join(out_dir, "seed.partial.jsonl")
    if variants_dir:
        seeds = seed_data.variants.measure_variants(tasks, variants_dir, journal, bench_kw)
        wrong = [s for s in seeds if (s["expect"] == "correct") != s["correct"]]
        for s in wrong:
            print(f"error: {s['task']} {s['variant']} is labelled {s['expect']} but bench.py says "
                  f"{s['result']['status']}: {s['result']['error'][:300]}")
        if wrong:  # no db.json / sft.jsonl from a broken measurement: a rerun must measure again
            write_jsonl(os.path.join(out_dir, "seed.jsonl"), seeds)
            if os.path.exists(journal):
                os.remove(journal)
            sys.exit(f"error: {len(wrong)} of {len(seeds)} seed kernels were not judged as labelled "
                     f"(results in {out_dir}/seed.jsonl); is the GPU, nvcc and CUDA_HOME set up?")
        rows = seed_data.variants.sft_rows(tasks, seeds, rng, sft_prompts_per_variant, gpu_name)
    if import_kernels:
        try:
            imported_seeds, imported_rows = seed_data.imports.import_kernels(
                [p.strip() for p in import_kernels.split(",") if p.strip()], tasks,
                os.path.join(out_dir, "import_report.jsonl"), bench_kw, gpu_name)
        except ValueError as e:
            sys.exit(f"error: {e}")
        seeds, rows = seeds + imported_seeds, rows + imported_rows
    if teachers:
        try:
            kept = seed_data.teachers.run_teachers(
                tasks, [s.strip() for s in teachers.split(",") if s.strip()], os.path.join(out_dir, "teacher"),
                gpu_name, bench_kw, teacher_tries, teacher_keep, teacher_batch, device=device, seed=seed,
                temperature=teacher_temperature, max_new_tokens=teacher_max_new_tokens,
                concurrency=teacher_concurrency, retries=teacher_retries, http_timeout_s=teacher_http_timeout_s)
        except seed_data.teachers.TeacherError as e:
            sys.exit(f"error: {e}\n(every answer and verdict so far is in {out_dir}/teacher/; rerun to continue)")
        except KeyboardInterrupt:
            print(f"interrupted: every answer and verdict so far is in {out_dir}/teacher/; rerun to continue",
                  file=sys.stderr)
            sys.exit(130)
        seeds += [dict(task=k["task"], variant=f"teacher:{k['teacher']}:{k['try']}", code=k["code"], expect="correct",
                       design="", analysis="", result=k["result"], correct=True, speedup=k["speedup"],
                       source=f"teacher:{k['teacher']}") for k in kept]
        rows += [dict(task=k["task"], source=f"teacher:{k['teacher']}", prompt=k["prompt"], response=k["response"])
                 for k in kept]

    # ---- seed.jsonl, db.json (one entry per distinct correct kernel) and sft.jsonl
    if seeds or rows:
        write_jsonl(os.path.join(out_dir, "seed.jsonl"), seeds)
        db = {t["name"]: [] for t in tasks}
        for s in seeds:
            if s["correct"] and all(e["code"] != s["code"] for e in db[s["task"]]):
                db[s["task"]].append(dict(code=s["code"], speedup=s["speedup"], step=-1,
                                          source=s.get("source") or f"variant:{s['variant']}"))
        common.write_json_atomic(os.path.join(out_dir, "db.json"), db)
        if import_kernels or teachers:  # mix the sources (sft_rows already shuffled the variant rows)
            rng.shuffle(rows)
        write_jsonl(os.path.join(out_dir, "sft.jsonl"), rows)
        if os.path.exists(journal):  # its results are in seed.jsonl now
            os.remove(journal)
        print(f"{len(seeds)} seed kernels ({sum(s['correct'] for s in seeds)} correct), {len(rows)} SFT rows "
              f"-> {out_dir}")
