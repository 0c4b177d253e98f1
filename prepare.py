"""
Stage 0: the task set, the seed kernels and the stage-1 SFT data.

    python prepare.py --kernelbench_dir=../shared/kernelbench --levels=1,2,3   # the task set only
    python prepare.py --preset=tiny   # + measured seed kernels and SFT data

    python prepare.py --teachers=openai:gpt-4o,hf:Qwen/Qwen2.5-Coder-7B-Instruct --teacher_tries=20   # stage-1 data
    python prepare.py --import_kernels=../shared/cudal1_sample/a100_sample.jsonl                     # + imports

Writes to out_dir:
  tasks.jsonl  one row per task: name ("level1/25_Swish"), level, file, src, split ("train" or "eval"), and with
               the screen: degenerate (bool or None), degenerate_passed (list), ref_ms (ms)
  seed.jsonl   (with variants_dir) every project-written kernel with its measured bench.py result
  db.json      (with variants_dir) the exemplar database rl.py starts from: {task: [{code, speedup, step, source}]}
  sft.jsonl    (with variants_dir) (prompt, response) pairs for sft.py
  seed.partial.jsonl  while the kernels are measured: each result as it comes; an interrupted run's rerun reuses
               them (Ctrl-C or SIGTERM lose no measurement), and the file is deleted once seed.jsonl is written
The KernelBench files are read from a local folder (../shared/kernelbench here) or, with --download=True,
fetched from the KernelBench GitHub repository with the standard library; they are never copied into the repo.

Stage-1 data from teacher models (--teachers=hf:NAME,openai:MODEL; CUDA-L1 §1.1 of REFERENCE.md: several LLMs,
up to 20 tries per model and task, only verified variants kept): every training task's one-shot prompt
(prompting.stage1_prompt) goes to each teacher up to teacher_tries times; every answer's code is verified with
bench.evaluate_many on this machine's device; at most teacher_keep distinct successful kernels per (teacher, task)
are kept (a (teacher, task) pair stops once it has them). hf:NAME runs a Hugging Face model locally (vLLM when
installed, else transformers generate); openai:MODEL posts to an OpenAI-compatible /v1/chat/completions endpoint
(base URL from $OPENAI_BASE_URL, default https://api.openai.com/v1; key from $OPENAI_API_KEY; standard library
only; retries with exponential backoff on connection errors, 429 and 5xx). Files in out_dir/teacher/: raw.jsonl
(every answer, appended as it arrives, so a rerun never asks a teacher twice), attempts.jsonl (one verdict per
(teacher, task, try); a rerun skips those), sft.jsonl (the kept rows: prompt, response, task, level, teacher,
try, speedup, code; appended as verified), summary.json (success rates per teacher and level, also printed).
Ctrl-C or a crash loses no written answer or verdict; answers not yet verified are verified by the rerun.

Import (--import_kernels=FILE,...): kernels from the CUDA-L1 release format (level_id, task_id, custom_code; e.g.
../shared/cudal1_sample/a100_sample.jsonl), this project's kernel/results files ({task, code} lines: evaluate.py's
results.jsonl, rl.py's samples) and rl.py's db.json ({task: [{code, speedup}]}), matched to the task set by name or
(level, KernelBench id), re-verified with bench.py on this device; the verified ones become seed kernels and SFT rows
(stage-1 prompt, the code in the answer format with "-" for the analysis and design they do not carry). Report:
out_dir/import_report.jsonl. Teacher data and imports use training tasks only, so the held-out split stays unseen.

Task screen (screen_degenerate; "auto" = on for CUDA): each task row gets `degenerate` and `degenerate_passed`
(bench.degenerate_screen: which trivial outputs pass its check, REFERENCE.md §3) and `ref_ms` (the eager
reference's median ms per call on this device, bench.py's timing of the reference against itself); results are
cached in out_dir/screen.jsonl by task source and device.

sft.jsonl and db.json collect every source of this run: project-written variants, teacher kernels, imports.

Split: "heldout" (default) puts a task in "eval" when a hash of its name falls in the last eval_fraction, which
is deterministic and stable as tasks are added; "paper" trains and evaluates on all tasks, as CUDA-L1 did
(REFERENCE.md §1.5: no train/test split).
"""
import glob
import hashlib
import io
import itertools
import json
import os
import random
import sys
import tarfile
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import common

import prompting
from evaluation import taskset
from training import generation, models

# -----------------------------------------------------------------------------
# config
kernelbench_dir = ""  # KernelBench's tasks; "" = $KERNELBENCH_DIR or ../shared/kernelbench
download = False  # fetch KernelBench from GitHub when kernelbench_dir does not exist
kernelbench_url = "https://github.com/ScalingIntelligence/KernelBench/archive/refs/heads/main.tar.gz"  # for download
levels = "1,2,3"  # KernelBench levels of the task set
task_names = ""  # comma list of "level1/25_Swish"-style names; empty = every task of the levels
split = "heldout"  # heldout | paper
eval_fraction = 0.2  # share of the tasks held out for evaluation (split=heldout)
out_dir = "out"  # the run folder the other stages read
variants_dir = ""  # project-written kernels (<task stem>/*.py): measured seeds + SFT data
sft_prompts_per_variant = 4  # SFT rows per kernel; the pairs of exemplars in its prompts go round all pairs
device = "cuda"  # where kernels are measured: cuda | cpu
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
    h = int(hashlib.sha256(name.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return "eval" if h >= 1.0 - frac else "train"


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


def measure_variants(tasks):
    """Measure every project-written kernel of every task with bench.py; returns seed rows. Each result is appended
    to out_dir/seed.partial.jsonl as soon as it is measured, so a rerun after an interrupt measures only the kernels
    that file lacks (issue 14 item 3); the main program deletes it once seed.jsonl is written."""
    import threading
    import bench
    jobs, meta = [], []
    for t in tasks:
        stem = t["name"].split("/")[-1]
        for path in sorted(glob.glob(os.path.join(variants_dir, stem, "*.py"))):
            code, m = prompting.parse_variant(open(path).read())
            jobs.append((t["name"], t["src"], code))
            meta.append(dict(task=t["name"], variant=os.path.basename(path)[:-3], code=code,
                             expect=m.get("expect", "correct"), design=m.get("design", ""),
                             analysis=m.get("analysis", "")))
    if not jobs:
        sys.exit(f"error: no kernels under {variants_dir}/<task stem>/*.py for the {len(tasks)} tasks "
                 f"({', '.join(t['name'] for t in tasks[:3])}...); check --variants_dir")
    journal = os.path.join(out_dir, "seed.partial.jsonl")
    key = lambda j: f"{j[0]}|{hashlib.sha256(j[2].encode()).hexdigest()[:16]}|{device}"
    done = {r["key"]: r["result"] for r in common.read_appended(journal) if {"key", "result"} <= set(r)}
    todo = [j for j in jobs if key(j) not in done]
    if len(todo) < len(jobs):
        print(f"reusing {len(jobs) - len(todo)} of {len(jobs)} kernels measured by an interrupted run ({journal})")
    lock = threading.Lock()

    def keep(i, r):  # as each kernel is measured (bench's worker thread)
        with lock:
            done[key(todo[i])] = r
            common.append_jsonl(journal, dict(key=key(todo[i]), result=r))
    if todo:
        out = bench.evaluate_many(todo, device=device, arch=arch or None, num_correct_trials=num_correct_trials,
                                  time_budget_s=time_budget_s, timeout_s=timeout_s,
                                  build_workers=build_workers or None, progress=True, on_result=keep)
        for j, r in zip(todo, out):
            done.setdefault(key(j), r)
    rows, shown = [], {key(j) for j in todo}      # bench printed these in full as they were measured
    for m, j in zip(meta, jobs):
        r = done[key(j)]
        rows.append(dict(m, result=r, correct=bool(r["correct"]), speedup=r.get("speedup")))
        short = f"ok {r['speedup']:.2f}x" if r["status"] == "ok" and r.get("speedup") else \
            r["status"] + (f" ({r['hack']})" if r.get("hack") else "")
        verdict = short if key(j) in shown else result_line(r)
        surprise = "" if bool(r["correct"]) == (m["expect"] == "correct") else f"  (expected {m['expect']})"
        print(f"  {m['task']:<28} {m['variant']:<28} expect={m['expect']:<8} {verdict}{surprise}")
    return rows


def result_line(r):
    """bench.result_summary with the error as common.error_line gives it (never an empty "log tail:")."""
    import bench
    return bench.result_summary(dict(r, error=common.error_line(r)))


def sft_rows(tasks, seeds, rng):
    """SFT pairs: each project-written kernel (right or wrong) as the answer to contrastive prompts whose two
    exemplars are measured-correct kernels of the task, so the model learns the stage-3 format and has no
    preference yet: which kernel is fast is left for RL to find out from the timings. Every kernel gets the pairs of
    exemplars in turn (each pair as often, in a shuffled order), not pairs drawn at random: with random pairs some
    pair never leads to some kernel, the SFT model then never writes it after that pair, and RL, whose prompts show
    the fastest kernel most often (bucket sampling), could not find it (issue 14 item 2: seeds where RL settled on a
    slower kernel)."""
    rows = []
    for t in tasks:
        mine = [s for s in seeds if s["task"] == t["name"]]
        good = [s for s in mine if s["correct"]]
        pairs = [list(p) for p in itertools.combinations(good, 2)] or [good]
        for s in mine:
            order = rng.sample(pairs, len(pairs))
            for i in range(sft_prompts_per_variant):
                ex = order[i % len(order)]
                prompt = prompting.contrastive_prompt(t["src"], [(e["code"], e["speedup"]) for e in ex], gpu_name)
                response = prompting.format_response(s["analysis"] or "-", s["design"] or "-", s["code"])
                rows.append(dict(task=t["name"], source=f"variant:{s['variant']}", prompt=prompt, response=response))
    rng.shuffle(rows)
    return rows


def bench_kw():
    """The bench.py settings of this script."""
    return dict(device=device, arch=arch or None, num_correct_trials=num_correct_trials, time_budget_s=time_budget_s,
                timeout_s=timeout_s, build_workers=build_workers or None)


def screen(tasks):
    """Add degenerate, degenerate_passed (bench.degenerate_screen) and ref_ms (the reference timed against itself,
    ms) to every task row; cached in out_dir/screen.jsonl by (name, source hash, device)."""
    import bench
    path = os.path.join(out_dir, "screen.jsonl")
    key = lambda t: f"{t['name']}|{hashlib.sha256(t['src'].encode()).hexdigest()[:16]}|{device}"
    cache = {r["key"]: r for r in common.read_jsonl(path)} if os.path.exists(path) else {}
    todo = [t for t in tasks if key(t) not in cache]
    if todo:
        from tqdm import tqdm
        print(f"screening {len(todo)} tasks (degenerate outputs, eager time) on {device}")
        # the reference against itself: `ModelNew` is the task's own Model, so bench times eager on both sides
        refs = bench.evaluate_many([(t["name"], t["src"], t["src"] + "\n\nclass ModelNew(Model):\n    pass\n")
                                    for t in todo], static_checks=False, **bench_kw())
        for t, r in zip(tqdm(todo, desc="degenerate screen"), refs):
            s = bench.degenerate_screen(t["src"], task_name=t["name"], device=device, arch=arch or None,
                                        num_correct_trials=num_correct_trials, timeout_s=timeout_s)
            row = dict(key=key(t), degenerate=s["degenerate"], degenerate_passed=s["passed"],
                       screen_status=s["status"], ref_ms=r.get("ref_ms"), ref_status=r["status"])
            common.append_jsonl(path, row)
            cache[row["key"]] = row
    for t in tasks:
        c = cache[key(t)]
        t.update(degenerate=c["degenerate"], degenerate_passed=c["degenerate_passed"], ref_ms=c["ref_ms"])
    n_deg = sum(bool(t["degenerate"]) for t in tasks)
    print(f"screen: {n_deg} of {len(tasks)} tasks accept a trivial output: "
          + (", ".join(f"{t['name']} ({'/'.join(t['degenerate_passed'])})" for t in tasks if t["degenerate"]) or "-"))
    failed = [t["name"] for t in tasks if t["degenerate"] is None]
    if failed:  # unknown, not clean: the screen itself failed (the reference crashed, ran out of memory, ...)
        print(f"screen FAILED on {len(failed)} tasks, degenerate unknown (causes in screen.jsonl): "
              + ", ".join(failed[:10]) + (" ..." if len(failed) > 10 else ""))


# -----------------------------------------------------------------------------
# Teachers

class TeacherError(RuntimeError):
    """A teacher that cannot answer: endpoint down, HTTP error, a model that cannot be loaded."""


def openai_chat(model, prompt):
    """One answer from an OpenAI-compatible endpoint: POST {base}/chat/completions, standard library only.

    Base URL from $OPENAI_BASE_URL (default https://api.openai.com/v1; "/v1" is added when missing), key from
    $OPENAI_API_KEY (no Authorization header without it, as local servers expect). Retries teacher_retries times
    with waits of 1, 2, 4... s on connection errors, timeouts, HTTP 429 and 5xx. Returns the message text;
    raises TeacherError with the URL and the cause once the retries are spent or on any other HTTP error.
    """
    base = os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1").rstrip("/")
    url = base + ("/chat/completions" if base.endswith("/v1") else "/v1/chat/completions")
    body = json.dumps(dict(model=model, messages=[dict(role="user", content=prompt)],
                           temperature=teacher_temperature, max_tokens=teacher_max_new_tokens)).encode()
    headers = {"Content-Type": "application/json"}
    if os.environ.get("OPENAI_API_KEY"):
        headers["Authorization"] = "Bearer " + os.environ["OPENAI_API_KEY"]
    why = ""
    for attempt in range(teacher_retries + 1):
        if attempt:
            time.sleep(2 ** (attempt - 1))
        try:
            req = urllib.request.Request(url, data=body, headers=headers, method="POST")
            with urllib.request.urlopen(req, timeout=teacher_http_timeout_s) as resp:
                out = json.loads(resp.read())
            return out["choices"][0]["message"]["content"] or ""
        except urllib.error.HTTPError as e:
            why = f"HTTP {e.code} {e.reason}: {e.read()[:300].decode(errors='replace')}"
            if e.code != 429 and e.code < 500:
                break  # a bad request or key: retrying will not help
        except (urllib.error.URLError, OSError) as e:  # connection refused, DNS, timeout
            why = f"{type(e).__name__}: {getattr(e, 'reason', e)}"
        except (ValueError, KeyError, IndexError, TypeError) as e:
            why = f"not a chat-completions answer ({type(e).__name__}: {e})"
            break
    raise TeacherError(f"teacher openai:{model} at {url}: {why}")


class Teacher:
    """A teacher by spec: hf:<name or folder> or openai:<model>. generate(prompts) -> list of answer texts."""

    def __init__(self, spec):
        kind, _, name = spec.partition(":")
        if kind not in ("hf", "openai") or not name:
            raise TeacherError(f"teacher {spec!r}: expected hf:<model name or path> or openai:<model>")
        self.spec, self.kind, self.name, self.model = spec, kind, name, None

    def generate(self, prompts):
        if self.kind == "openai":
            with ThreadPoolExecutor(max(1, teacher_concurrency)) as pool:
                return list(pool.map(lambda p: openai_chat(self.name, p), prompts))
        if self.model is None:  # loaded on first use, kept for the rest of this teacher's tasks
            if generation.vllm_available() and device.startswith("cuda"):
                from transformers import AutoTokenizer
                self.tok = AutoTokenizer.from_pretrained(self.name)
                self.model, self.vllm = generation.load_vllm(self.name, gpu_memory_utilization=0.85, seed=seed), True
            else:
                try:
                    self.model, self.tok = models.load_model(self.name, device=device,
                                                             dtype="bfloat16" if device.startswith("cuda") else "float32")
                except RuntimeError as e:
                    raise TeacherError(f"teacher {self.spec}: {e}") from None
                self.vllm = False
        if self.vllm:
            gens = generation.vllm_generate(self.model, self.tok, prompts, 1, teacher_max_new_tokens,
                                            teacher_temperature)
        else:
            gens = generation.generate(self.model, self.tok, prompts, 1, teacher_max_new_tokens, teacher_temperature)
        return [g["text"] for g in gens]

    def close(self):
        self.model = None
        if device.startswith("cuda"):
            import torch
            torch.cuda.empty_cache()


def answer_part(text):
    """The answer from its first "## " section on (drops a preamble or a reasoning model's thinking)."""
    i = text.find(prompting.SECTIONS[0])
    return text[i:] if i >= 0 else text


def run_teachers(tasks):
    """Stage-1 data from the teachers (module docstring); returns the kept rows of all teachers (this run and
    earlier ones). Raises TeacherError for an unusable teacher; everything verified before it stays on disk."""
    import bench
    from tqdm import tqdm
    tdir = os.path.join(out_dir, "teacher")
    os.makedirs(tdir, exist_ok=True)
    paths = {k: os.path.join(tdir, k + ".jsonl") for k in ("raw", "attempts", "sft")}
    load = lambda k: common.read_jsonl(paths[k]) if os.path.exists(paths[k]) else []
    triple = lambda r: (r["teacher"], r["task"], r["try"])
    raw = {triple(r): r for r in load("raw")}
    done = {triple(r) for r in load("attempts")}
    kept = load("sft")
    train = [t for t in tasks if t["split"] == "train"]
    by_name = {t["name"]: t for t in train}
    for spec in [x.strip() for x in teachers.split(",") if x.strip()]:
        teacher = Teacher(spec)
        n_kept = lambda n: sum(k["teacher"] == spec and k["task"] == n for k in kept)
        seen = {(k["task"], k["code"]) for k in kept if k["teacher"] == spec}
        bar = tqdm(total=len(train) * teacher_tries, desc=spec, initial=sum(d[0] == spec for d in done))
        for b in range(0, teacher_tries, teacher_batch):
            todo = [(t["name"], k) for t in train if n_kept(t["name"]) < teacher_keep
                    for k in range(b, min(b + teacher_batch, teacher_tries)) if (spec, t["name"], k) not in done]
            if not todo:
                continue
            # 1. answers (written as they arrive, reused by a rerun)
            ask = [(n, k) for n, k in todo if (spec, n, k) not in raw]
            if ask:
                texts = teacher.generate([prompting.stage1_prompt(by_name[n]["src"], gpu_name) for n, _ in ask])
                for (n, k), text in zip(ask, texts):
                    r = {"teacher": spec, "task": n, "try": k, "text": text}
                    common.append_jsonl(paths["raw"], r)
                    raw[(spec, n, k)] = r
            # 2. verify every answer's code with bench.py
            codes = [prompting.extract_code(raw[(spec, n, k)]["text"]) for n, k in todo]
            jobs = [(n, by_name[n]["src"], c) for (n, _), (c, _) in zip(todo, codes) if c]
            results = iter(bench.evaluate_many(jobs, **bench_kw()) if jobs else [])
            # 3. keep up to teacher_keep distinct successful kernels per task; one verdict per try
            for (n, k), (code, err) in zip(todo, codes):
                res = next(results) if code else None
                status = res["status"] if res else "format_error"
                keep = status == "ok" and n_kept(n) < teacher_keep and (n, code) not in seen
                if keep:
                    row = {"prompt": prompting.stage1_prompt(by_name[n]["src"], gpu_name),
                           "response": answer_part(raw[(spec, n, k)]["text"]), "task": n,
                           "level": by_name[n]["level"], "teacher": spec, "try": k, "speedup": res["speedup"],
                           "code": code, "result": res}
                    common.append_jsonl(paths["sft"], row)
                    kept.append(row)
                    seen.add((n, code))
                a = {"teacher": spec, "task": n, "level": by_name[n]["level"], "try": k, "status": status,
                     "kept": keep, "speedup": res.get("speedup") if res else None,
                     "error": (err or (res or {}).get("error") or "")[:300]}
                common.append_jsonl(paths["attempts"], a)
                done.add((spec, n, k))
                bar.update(1)
        bar.close()
        teacher.close()
    summary = teacher_summary(load("attempts"))
    common.write_json_atomic(os.path.join(tdir, "summary.json"), summary)
    print("teacher | level | tries | ok | success rate | tasks with a kept kernel | kept")
    for s in summary:
        print(f"{s['teacher']} | {s['level']} | {s['tries']} | {s['ok']} | {s['success_rate']:.3f} | "
              f"{s['tasks_kept']}/{s['tasks']} | {s['kept']}")
    return kept


def teacher_summary(attempts):
    """Per (teacher, level) and per teacher over all levels ("all"): tries, ok, success_rate = ok / tries,
    tasks (tried), tasks_kept (with >= 1 kept kernel), kept."""
    groups = {}
    for a in attempts:
        for lv in (a["level"], "all"):
            groups.setdefault((a["teacher"], lv), []).append(a)
    out = []
    for (t, lv), rows in sorted(groups.items(), key=lambda x: (x[0][0], str(x[0][1]))):
        ok = sum(r["status"] == "ok" for r in rows)
        out.append(dict(teacher=t, level=lv, tries=len(rows), ok=ok, success_rate=ok / len(rows),
                        tasks=len({r["task"] for r in rows}), tasks_kept=len({r["task"] for r in rows if r["kept"]}),
                        kept=sum(r["kept"] for r in rows),
                        status={s: sum(r["status"] == s for r in rows) for s in sorted({r["status"] for r in rows})}))
    return out


# -----------------------------------------------------------------------------
# Import

def read_import(path, tasks):
    """[(task name, code, source)] from a kernels file: rl.py's db.json, or JSON lines in the CUDA-L1 release
    format or this project's {task, code} format (taskset.read_kernels; CUDA-L1 lines are matched to the task set
    by level and KernelBench id). Raises ValueError for a missing or malformed file."""
    if not os.path.exists(path):
        raise ValueError(f"import file {path!r} does not exist")
    src = os.path.basename(path)
    if path.endswith(".json"):
        db = common.read_json(path)
        if not isinstance(db, dict) or not all(isinstance(v, list) for v in db.values()):
            raise ValueError(f"{path}: expected rl.py's db.json, {{task: [{{code, speedup}}, ...]}}")
        return [(n, e["code"], f"import:{src}") for n, es in db.items() for e in es if e.get("code")]
    krows = taskset.match_tasks(taskset.read_kernels(path), tasks)
    return [(k["task"], k["code"], f"import:{src}") for k in krows if k["code"]]


def import_kernels_run(tasks):
    """Re-verify imported kernels on this device; returns (seed rows, SFT rows) of the verified ones."""
    import bench
    by_name = {t["name"]: t for t in tasks}
    items = []
    for p in [x.strip() for x in import_kernels.split(",") if x.strip()]:
        items += read_import(p, tasks)
    known = [(n, c, s) for n, c, s in items if n in by_name]
    train = list({(n, c): (n, c, s) for n, c, s in known if by_name[n]["split"] == "train"}.values())  # dedupe
    print(f"import: {len(items)} kernels, {len(known)} of tasks in the task set, {len(train)} distinct on training "
          f"tasks (kernels of held-out tasks are not imported)")
    results = bench.evaluate_many([(n, by_name[n]["src"], c) for n, c, _ in train], progress=True, **bench_kw())
    seeds, rows = [], []
    rep = os.path.join(out_dir, "import_report.jsonl")
    if os.path.exists(rep):
        os.remove(rep)
    for i, ((n, code, srcname), r) in enumerate(zip(train, results)):
        common.append_jsonl(rep, dict(task=n, source=srcname, status=r["status"], speedup=r.get("speedup"),
                                      error=(r.get("error") or "")[:300]))
        print(f"  {srcname:<32} {result_line(r)}")
        if r["status"] != "ok":
            continue
        seeds.append(dict(task=n, variant=f"{srcname}:{i}", code=code, expect="correct", design="", analysis="",
                          result=r, correct=True, speedup=r["speedup"], source=srcname))
        rows.append(dict(task=n, source=srcname, prompt=prompting.stage1_prompt(by_name[n]["src"], gpu_name),
                         response=prompting.format_response("-", "-", code)))
    print(f"import: {len(seeds)} of {len(train)} kernels verified on {device}")
    return seeds, rows


if __name__ == "__main__":
    common.exit_on_interrupt()
    common.configure(globals())
    if split not in ("heldout", "paper"):
        sys.exit(f"error: --split must be heldout or paper, not {split!r}")
    if variants_dir or teachers or import_kernels or screen_degenerate in ("True", "auto") and device.startswith("cuda"):
        common.check_device(device)
    rng = random.Random(seed)
    os.makedirs(out_dir, exist_ok=True)
    kernelbench_dir = kernelbench_dir or taskset.KERNELBENCH_DEFAULT
    if not os.path.isdir(kernelbench_dir):
        if not download:
            sys.exit(f"error: task folder {kernelbench_dir!r} not found; pass --kernelbench_dir=PATH or --download=True")
        kernelbench_dir = os.path.join(out_dir, "kernelbench")
        fetch_kernelbench(kernelbench_dir)
    try:
        tasks = taskset.load_tasks(kernelbench_dir, [int(x) for x in str(levels).split(",") if x],
                           [n for n in task_names.split(",") if n])
    except ValueError as e:
        sys.exit(f"error: {e}")
    for t in tasks:
        t["split"] = "train" if split == "paper" else split_of(t["name"], eval_fraction)
    if screen_degenerate == "True" or (screen_degenerate == "auto" and device.startswith("cuda")):
        screen(tasks)
    with open(os.path.join(out_dir, "tasks.jsonl"), "w") as f:
        for t in tasks:
            f.write(common.json.dumps(t) + "\n")
    n_eval = sum(t["split"] == "eval" for t in tasks)
    print(f"{len(tasks)} tasks ({len(tasks) - n_eval} train, {n_eval} eval) -> {out_dir}/tasks.jsonl")

    seeds, rows = [], []
    if variants_dir:
        seeds = measure_variants(tasks)
        wrong = [s for s in seeds if (s["expect"] == "correct") != s["correct"]]
        for s in wrong:
            print(f"error: {s['task']} {s['variant']} is labelled {s['expect']} but bench.py says "
                  f"{s['result']['status']}: {s['result']['error'][:300]}")
        if wrong:  # no db.json / sft.jsonl from a broken measurement: a rerun must measure again
            with open(os.path.join(out_dir, "seed.jsonl"), "w") as f:
                for s in seeds:
                    f.write(common.json.dumps(s) + "\n")
            if os.path.exists(os.path.join(out_dir, "seed.partial.jsonl")):  # a rerun must measure again
                os.remove(os.path.join(out_dir, "seed.partial.jsonl"))
            sys.exit(f"error: {len(wrong)} of {len(seeds)} seed kernels were not judged as labelled "
                     f"(results in {out_dir}/seed.jsonl); is the GPU, nvcc and CUDA_HOME set up?")
        rows = sft_rows(tasks, seeds, rng)
    if import_kernels:
        try:
            imp_seeds, imp_rows = import_kernels_run(tasks)
        except ValueError as e:
            sys.exit(f"error: {e}")
        seeds, rows = seeds + imp_seeds, rows + imp_rows
    if teachers:
        try:
            kept = run_teachers(tasks)
        except TeacherError as e:
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
    if seeds or rows:
        with open(os.path.join(out_dir, "seed.jsonl"), "w") as f:
            for s in seeds:
                f.write(common.json.dumps(s) + "\n")
        db = {t["name"]: [] for t in tasks}
        for s in seeds:  # one entry per distinct correct kernel
            if s["correct"] and all(e["code"] != s["code"] for e in db[s["task"]]):
                db[s["task"]].append(dict(code=s["code"], speedup=s["speedup"], step=-1,
                                          source=s.get("source") or f"variant:{s['variant']}"))
        common.write_json_atomic(os.path.join(out_dir, "db.json"), db)
        if import_kernels or teachers:  # mix the sources (sft_rows already shuffled the variant rows)
            rng.shuffle(rows)
        with open(os.path.join(out_dir, "sft.jsonl"), "w") as f:
            for r in rows:
                f.write(common.json.dumps(r) + "\n")
        if os.path.exists(os.path.join(out_dir, "seed.partial.jsonl")):  # its results are in seed.jsonl now
            os.remove(os.path.join(out_dir, "seed.partial.jsonl"))
        print(f"{len(seeds)} seed kernels ({sum(s['correct'] for s in seeds)} correct), {len(rows)} SFT rows -> {out_dir}")
