"""
Stage-1 data from teacher models (CUDA-L1, REFERENCE.md §1.1: several LLMs, up to 20 tries per model and task, only
verified variants kept). Every training task's one-shot prompt (prompting.stage1_prompt) goes to each teacher up to
`tries` times; every answer's code is verified with bench.evaluate_many; at most `keep` distinct passing kernels per
(teacher, task) are kept, and a pair stops once it has them.

hf:NAME runs a Hugging Face model locally (vLLM when installed and on CUDA, else transformers generate); openai:MODEL
posts to an OpenAI-compatible /v1/chat/completions endpoint (base URL $OPENAI_BASE_URL, default
https://api.openai.com/v1; key $OPENAI_API_KEY), standard library only, retrying with exponential backoff on
connection errors, 429 and 5xx. Files in teacher_dir: raw.jsonl (every answer, appended as it arrives: a rerun
never asks twice), attempts.jsonl (one verdict per (teacher, task, try): a rerun skips those), sft.jsonl (the kept
rows, appended as verified), summary.json (success rates per teacher and level).
"""
import collections
import json
import os
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import common
import prompting
from training import generation, models


class TeacherError(RuntimeError):
    """A teacher that cannot answer: endpoint down, HTTP error, a model that cannot be loaded."""


def openai_chat(model, prompt, temperature, max_tokens, retries, timeout_s):
    """One answer from an OpenAI-compatible endpoint: POST {base}/chat/completions, standard library only.

    Base URL from $OPENAI_BASE_URL (default https://api.openai.com/v1; "/v1" is added when missing), key from
    $OPENAI_API_KEY (no Authorization header without it, as local servers expect). Retries `retries` times with
    waits of 1, 2, 4... s on connection errors, timeouts, HTTP 429 and 5xx; timeout_s per request. Returns the
    message text; raises TeacherError with the URL and the cause once the retries are spent or on any other HTTP
    error.
    """
    base = os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1").rstrip("/")
    url = base + ("/chat/completions" if base.endswith("/v1") else "/v1/chat/completions")
    body = json.dumps(dict(model=model, messages=[dict(role="user", content=prompt)],
                           temperature=temperature, max_tokens=max_tokens)).encode()
    headers = {"Content-Type": "application/json"}
    if os.environ.get("OPENAI_API_KEY"):
        headers["Authorization"] = "Bearer " + os.environ["OPENAI_API_KEY"]
    why = ""
    for attempt in range(retries + 1):
        if attempt:
            time.sleep(2 ** (attempt - 1))
        try:
            request = urllib.request.Request(url, data=body, headers=headers, method="POST")
            with urllib.request.urlopen(request, timeout=timeout_s) as response:
                answer = json.loads(response.read())
            return answer["choices"][0]["message"]["content"] or ""
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
    """A teacher by spec, hf:<name or folder> or openai:<model>; generate(prompts) -> list of answer texts.
    Raises TeacherError for a malformed spec or a model that cannot be loaded."""

    def __init__(self, spec, device, seed, temperature, max_new_tokens, concurrency, retries, http_timeout_s):
        kind, _, name = spec.partition(":")
        if kind not in ("hf", "openai") or not name:
            raise TeacherError(f"teacher {spec!r}: expected hf:<model name or path> or openai:<model>")
        self.spec, self.kind, self.name, self.model = spec, kind, name, None
        self.device, self.seed, self.temperature, self.max_new_tokens = device, seed, temperature, max_new_tokens
        self.concurrency, self.retries, self.http_timeout_s = concurrency, retries, http_timeout_s

    def generate(self, prompts):
        if self.kind == "openai":
            with ThreadPoolExecutor(max(1, self.concurrency)) as pool:
                return list(pool.map(lambda p: openai_chat(self.name, p, self.temperature, self.max_new_tokens,
                                                           self.retries, self.http_timeout_s), prompts))
        cuda = self.device.startswith("cuda")
        if self.model is None:  # loaded on first use, kept for the rest of this teacher's tasks
            self.vllm = generation.vllm_available() and cuda
            if self.vllm:
                from transformers import AutoTokenizer
                self.tokenizer = AutoTokenizer.from_pretrained(self.name)
                self.model = generation.load_vllm(self.name, gpu_memory_utilization=0.85, seed=self.seed)
            else:
                try:
                    self.model, self.tokenizer = models.load_model(self.name, device=self.device,
                                                                   dtype="bfloat16" if cuda else "float32")
                except RuntimeError as e:
                    raise TeacherError(f"teacher {self.spec}: {e}") from None
        run = generation.vllm_generate if self.vllm else generation.generate
        answers = run(self.model, self.tokenizer, prompts, 1, self.max_new_tokens, self.temperature)
        return [a["text"] for a in answers]

    def close(self):
        self.model = None
        if self.device.startswith("cuda"):
            import torch
            torch.cuda.empty_cache()


def answer_part(text):
    """The answer from its first "## " section on (drops a preamble or a reasoning model's thinking)."""
    i = text.find(prompting.SECTIONS[0])
    return text[i:] if i >= 0 else text


def run_teachers(tasks, specs, teacher_dir, gpu_name, bench_kw, tries, keep, batch, **teacher_kw):
    """Stage-1 data from the teachers `specs` (module docstring) on the training tasks; returns the kept rows
    {prompt, response, task, level, teacher, try, speedup, code, result} of all teachers, this run's and earlier
    ones'. bench_kw: bench.evaluate_many's settings; teacher_kw: Teacher's (device, seed, temperature, ...).
    Raises TeacherError for an unusable teacher; everything verified before it stays on disk."""
    import bench
    from tqdm import tqdm
    os.makedirs(teacher_dir, exist_ok=True)
    paths = {k: os.path.join(teacher_dir, k + ".jsonl") for k in ("raw", "attempts", "sft")}

    def load(kind):
        return common.read_jsonl(paths[kind]) if os.path.exists(paths[kind]) else []

    def triple(row):
        return row["teacher"], row["task"], row["try"]
    raw = {triple(r): r for r in load("raw")}
    done = {triple(r) for r in load("attempts")}
    kept = load("sft")
    train = [t for t in tasks if t["split"] == "train"]
    by_name = {t["name"]: t for t in train}
    for spec in specs:
        teacher = Teacher(spec, **teacher_kw)

        def num_kept(name):
            return sum(k["teacher"] == spec and k["task"] == name for k in kept)
        seen = {(k["task"], k["code"]) for k in kept if k["teacher"] == spec}
        progress = tqdm(total=len(train) * tries, desc=spec, initial=sum(d[0] == spec for d in done))
        for first in range(0, tries, batch):
            todo = [(t["name"], k) for t in train if num_kept(t["name"]) < keep
                    for k in range(first, min(first + batch, tries)) if (spec, t["name"], k) not in done]
            if not todo:
                continue
            # 1. answers (written as they arrive, reused by a rerun)
            ask = [(n, k) for n, k in todo if (spec, n, k) not in raw]
            if ask:
                texts = teacher.generate([prompting.stage1_prompt(by_name[n]["src"], gpu_name) for n, _ in ask])
                for (name, k), text in zip(ask, texts):
                    row = {"teacher": spec, "task": name, "try": k, "text": text}
                    common.append_jsonl(paths["raw"], row)
                    raw[(spec, name, k)] = row
            # 2. verify every answer's code with bench.py
            codes = [prompting.extract_code(raw[(spec, n, k)]["text"]) for n, k in todo]
            jobs = [(n, by_name[n]["src"], c) for (n, _), (c, _) in zip(todo, codes) if c]
            results = iter(bench.evaluate_many(jobs, **bench_kw) if jobs else [])
            # 3. keep up to `keep` distinct passing kernels per task; one verdict per try
            for (name, k), (code, err) in zip(todo, codes):
                res = next(results) if code else None
                status = res["status"] if res else "format_error"
                kept_now = status == "ok" and num_kept(name) < keep and (name, code) not in seen
                if kept_now:
                    row = {"prompt": prompting.stage1_prompt(by_name[name]["src"], gpu_name),
                           "response": answer_part(raw[(spec, name, k)]["text"]), "task": name,
                           "level": by_name[name]["level"], "teacher": spec, "try": k, "speedup": res["speedup"],
                           "code": code, "result": res}
                    common.append_jsonl(paths["sft"], row)
                    kept.append(row)
                    seen.add((name, code))
                common.append_jsonl(paths["attempts"], {
                    "teacher": spec, "task": name, "level": by_name[name]["level"], "try": k, "status": status,
                    "kept": kept_now, "speedup": res.get("speedup") if res else None,
                    "error": (err or (res or {}).get("error") or "")[:300]})
                done.add((spec, name, k))
                progress.update(1)
        progress.close()
        teacher.close()
    summary = teacher_summary(load("attempts"))
    common.write_json_atomic(os.path.join(teacher_dir, "summary.json"), summary)
    print("teacher | level | tries | ok | success rate | tasks with a kept kernel | kept")
    for s in summary:
        print(f"{s['teacher']} | {s['level']} | {s['tries']} | {s['ok']} | {s['success_rate']:.3f} | "
              f"{s['tasks_kept']}/{s['tasks']} | {s['kept']}")
    return kept


def teacher_summary(attempts):
    """Per (teacher, level) and per teacher over all levels ("all"): tries, ok, success_rate = ok / tries,
    tasks (tried), tasks_kept (with >= 1 kept kernel), kept, and the count of each status."""
    groups = {}
    for attempt in attempts:
        for level in (attempt["level"], "all"):
            groups.setdefault((attempt["teacher"], level), []).append(attempt)
    summary = []
    for (teacher, level), rows in sorted(groups.items(), key=lambda item: (item[0][0], str(item[0][1]))):
        ok = sum(r["status"] == "ok" for r in rows)
        summary.append(dict(teacher=teacher, level=level, tries=len(rows), ok=ok, success_rate=ok / len(rows),
                            tasks=len({r["task"] for r in rows}),
                            tasks_kept=len({r["task"] for r in rows if r["kept"]}), kept=sum(r["kept"] for r in rows),
                            status=dict(sorted(collections.Counter(r["status"] for r in rows).items()))))
    return summary
