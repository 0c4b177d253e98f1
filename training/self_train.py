"""Stage 2 of CUDA-L1 (REFERENCE.md §1.2): self-training, i.e. rejection-sampling fine-tuning with a binary reward;
sft.py --self_train=True runs it, as one process.

Round r: sample self_train_samples (K) answers per training task (tasks.jsonl split "train") from the current model
(transformers generate, or vLLM with use_vllm=True), take the code (prompting.extract_code), evaluate every distinct
kernel with bench.evaluate_many, keep the successful ones (status "ok"; speed ignored; deduplicated by task and
code), fine-tune the current model for self_train_iters iterations on all kernels kept so far (the paper fine-tunes
on the successful samples only; self_train_mix_stage1=True adds the stage-1 rows), repeat. A last measuring round
after the final fine-tune (no training) shows the gain: success rate of round 0 = the stage-1 model, of round R =
after R rounds. The prompt is the contrastive prompt with self_train_exemplars kernels drawn from out_dir/db.json
(the format prepare.py's SFT data teaches; 0, or no db.json = the paper's stage-1 prompt). Each round is resumable:
its samples and bench results are cached in self_train/round<r>/, a finished round is in log.jsonl and skipped, an
interrupted fine-tune continues from its state.pt.

Output in out_dir/self_train: log.jsonl (one row per round: round, model, samples, ok, success_rate, status
fractions, kept_new, kept_total, times in s), kept.jsonl (every kept sample: task, code, response, round, bench
result), round<r>/samples.jsonl (every sample with its status), round<r>/model (the model after round r's
fine-tune), summary.json.
"""
import json
import os
import random
import time

import torch

import common
import prompting
from training.exemplars import kernel_key
from training.generation import generate, load_vllm, vllm_available, vllm_generate


def sample_round(cfg, model_dir, model, tok, tasks, db, rng):
    """K answers per task from the model; returns [{task, prompt, text, truncated, code, format_error}]."""
    prompts = []
    for t in tasks:
        good = db.get(t["name"], [])
        ex = rng.sample(good, min(cfg.self_train_exemplars, len(good))) if cfg.self_train_exemplars else []
        prompts.append(prompting.contrastive_prompt(t["src"], [(e["code"], e["speedup"]) for e in ex], cfg.gpu_name))
    if cfg.use_vllm and vllm_available():
        llm = load_vllm(model_dir, seed=rng.randrange(2 ** 31))
        gens = vllm_generate(llm, tok, prompts, cfg.self_train_samples, cfg.max_new_tokens, cfg.temperature, cfg.top_p)
        del llm
    else:
        if cfg.use_vllm:
            print("use_vllm=True but vllm is not installed: sampling with transformers generate")
        model.to(cfg.device)
        gens = list(generate(model, tok, prompts, cfg.self_train_samples, cfg.max_new_tokens, cfg.temperature,
                             cfg.top_p, batch_size=cfg.gen_batch_size))
    out = []
    for i, g in enumerate(gens):
        t, p = tasks[i // cfg.self_train_samples], prompts[i // cfg.self_train_samples]
        code, err = prompting.extract_code(g["text"])
        out.append(dict(task=t["name"], prompt=p, text=g["text"], truncated=g["truncated"], code=code,
                        format_error=err))
    return out


def run(cfg, stage1_rows, load, finetune):
    """Stage 2: the rounds of the module docstring. cfg: sft.py's settings (attributes); load(path) -> (model, tok);
    finetune(model, tok, rows, save_dir, iters): sft.py's train, resuming from save_dir's state.pt when there is one.
    Returns the log rows (one per round); SystemExit with one line when the task set or the stage-1 model is missing."""
    import bench
    st_dir = os.path.join(cfg.out_dir, "self_train")
    os.makedirs(st_dir, exist_ok=True)
    tasks_path = os.path.join(cfg.out_dir, "tasks.jsonl")
    if not os.path.exists(tasks_path):
        raise SystemExit(f"error: no task set {tasks_path}: run prepare.py first")
    tasks = [t for t in common.read_jsonl(tasks_path) if t.get("split") == "train"]
    if not tasks:
        raise SystemExit(f"error: no tasks with split 'train' in {tasks_path}")
    if cfg.self_train_tasks and len(tasks) > cfg.self_train_tasks:
        tasks = sorted(random.Random(cfg.seed).sample(tasks, cfg.self_train_tasks), key=lambda t: t["name"])
    db_path = os.path.join(cfg.out_dir, "db.json")
    db = common.read_json(db_path) if os.path.exists(db_path) else {}
    start = cfg.self_train_from or os.path.join(cfg.out_dir, "sft")
    if not os.path.exists(os.path.join(start, "config.json")) and not cfg.self_train_from:
        raise SystemExit(f"error: no stage-1 model in {start}: run sft.py first or give --self_train_from=MODEL")
    log_path, kept_path = os.path.join(st_dir, "log.jsonl"), os.path.join(st_dir, "kept.jsonl")
    log = common.read_jsonl(log_path) if os.path.exists(log_path) else []
    done = {h["round"] for h in log}
    bench_dev = "cuda" if cfg.device.startswith("cuda") else "cpu"
    print(f"self-training: {len(tasks)} tasks x {cfg.self_train_samples} samples, {cfg.self_train_rounds} rounds, "
          f"from {start}")
    for r in range(cfg.self_train_rounds + 1):
        rdir = os.path.join(st_dir, f"round{r}")
        model_in = start if r == 0 else os.path.join(st_dir, f"round{r - 1}", "model")
        if r in done:
            continue
        os.makedirs(rdir, exist_ok=True)
        kept = {}  # every kept sample so far, by hash of (task, code); file order = round order
        for k in (common.read_jsonl(kept_path) if os.path.exists(kept_path) else []):
            if k["round"] < r:
                kept.setdefault(k["key"], k)
        model, tok = load(model_in)
        rng = random.Random(cfg.seed * 1000 + r)
        torch.manual_seed(cfg.seed * 1000 + r)
        t0 = time.time()
        # 1. sample (cached: a rerun of an interrupted round reuses its samples and bench results)
        samples_path = os.path.join(rdir, "samples.jsonl")
        if os.path.exists(samples_path):
            samples = common.read_jsonl(samples_path)
        else:
            samples = sample_round(cfg, model_in, model, tok, tasks, db, rng)
            t1 = time.time()
            # 2. evaluate every distinct kernel once
            src = {t["name"]: t["src"] for t in tasks}
            jobs = {kernel_key(s["task"], s["code"]): (s["task"], src[s["task"]], s["code"])
                    for s in samples if s["code"]}
            results = dict(zip(jobs, bench.evaluate_many(
                list(jobs.values()), device=bench_dev, arch=cfg.arch or None, num_correct_trials=cfg.num_correct_trials,
                time_budget_s=cfg.time_budget_s, timeout_s=cfg.timeout_s, build_workers=cfg.build_workers or None,
                progress=True)))
            for s in samples:
                res = results.get(kernel_key(s["task"], s["code"])) if s["code"] else None
                s.update(key=kernel_key(s["task"], s["code"]) if s["code"] else None, result=res,
                         status=res["status"] if res else "format_error", speedup=res and res.get("speedup"))
            s_tmp = samples_path + ".tmp"
            with open(s_tmp, "w") as f:
                for s in samples:
                    f.write(json.dumps(s) + "\n")
            os.replace(s_tmp, samples_path)
            print(f"round {r}: sampled in {t1 - t0:.0f}s, evaluated {len(jobs)} distinct kernels in "
                  f"{time.time() - t1:.0f}s")
        t2 = time.time()
        # 3. keep the successful ones (binary reward: speed ignored), new ones only
        new = []
        for s in samples:
            if s["status"] == "ok" and s["key"] not in kept:
                k = dict(key=s["key"], task=s["task"], round=r, code=s["code"], prompt=s["prompt"],
                         response=s["text"], speedup=s["speedup"], result=s["result"])
                kept[s["key"]] = k
                new.append(k)
        if os.path.exists(kept_path):  # drop rows of this round left by an interrupted run, then append
            old = [k for k in common.read_jsonl(kept_path) if k["round"] < r]
            with open(kept_path + ".tmp", "w") as f:
                for k in old:
                    f.write(json.dumps(k) + "\n")
            os.replace(kept_path + ".tmp", kept_path)
        for k in new:
            common.append_jsonl(kept_path, k)
        # 4. fine-tune on all kept samples (not after the last, measuring round)
        n = len(samples)
        frac = lambda k: sum(s["status"] == k for s in samples) / max(n, 1)
        h = dict(round=r, model=model_in, samples=n, ok=sum(s["status"] == "ok" for s in samples),
                 success_rate=frac("ok"), format_error=frac("format_error"), compile_error=frac("compile_error"),
                 incorrect=frac("incorrect"), hack=frac("hack"),
                 crash=frac("crash") + frac("timeout") + frac("runtime_error"),
                 truncated=sum(bool(s["truncated"]) for s in samples) / max(n, 1),
                 per_task={t["name"]: sum(s["status"] == "ok" for s in samples if s["task"] == t["name"]) /
                           max(1, sum(s["task"] == t["name"] for s in samples)) for t in tasks},
                 kept_new=len(new), kept_total=len(kept), trained=False, t_sample_eval=t2 - t0)
        if r < cfg.self_train_rounds:
            rows = [dict(prompt=k["prompt"], response=k["response"]) for k in kept.values()]
            if cfg.self_train_mix_stage1:
                rows += stage1_rows
            if rows:
                save_dir = os.path.join(rdir, "model")
                if os.path.exists(os.path.join(save_dir, "state.pt")):
                    model, tok = load(save_dir)
                finetune(model, tok, rows, save_dir, cfg.self_train_iters)
                h["trained"] = True
            else:  # nothing kept yet: the next round samples the same model again
                print(f"round {r}: no successful sample to train on; the next round samples the same model")
                model.save_pretrained(os.path.join(rdir, "model"))
                tok.save_pretrained(os.path.join(rdir, "model"))
            h["train_rows"] = len(rows)
        h["t_train"] = time.time() - t2
        common.append_jsonl(log_path, h)
        log.append(h)
        print(f"round {r} | model {model_in} | success rate {h['success_rate']:.3f} ({h['ok']}/{n}) | format "
              f"{h['format_error']:.2f} compile {h['compile_error']:.2f} wrong {h['incorrect']:.2f} crash "
              f"{h['crash']:.2f} hack {h['hack']:.2f} | kept +{len(new)} = {len(kept)}"
              + (f" | trained on {h.get('train_rows', 0)} rows" if r < cfg.self_train_rounds else " | measure only"),
              flush=True)
        del model
        if cfg.device.startswith("cuda"):
            torch.cuda.empty_cache()
    log.sort(key=lambda h: h["round"])
    common.write_json_atomic(os.path.join(st_dir, "summary.json"), dict(
        success_rate=[h["success_rate"] for h in log], rounds=cfg.self_train_rounds,
        samples_per_task=cfg.self_train_samples, tasks=[t["name"] for t in tasks],
        final_model=os.path.join(st_dir, f"round{cfg.self_train_rounds - 1}", "model")))
    print("success rate per round: " + " ".join(f"{h['success_rate']:.3f}" for h in log))
    return log
