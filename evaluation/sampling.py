"""
The models' answers that evaluate.py measures (--model): which models, the prompt of each task, and num_samples
answers per task and model, each appended to samples.jsonl as it is generated so that a rerun continues.
"""
import collections
import os
import sys

from tqdm import tqdm

import common
import prompting
from evaluation import baseline
from training.generation import generate
from training.models import load_model


def parse_models(spec):
    """[(method, name)] of --model: "NAME" -> [("model", NAME)]; "a=X,b=Y" -> [("a", X), ("b", Y)]; an unlabelled
    entry of a list is "model<i>". Raises ValueError for a label used twice or one that names a baseline."""
    items = [s.strip() for s in spec.split(",") if s.strip()]
    models = []
    for i, item in enumerate(items, 1):
        label, sep, name = item.partition("=")
        models.append((label.strip(), name.strip()) if sep else ("model" if len(items) == 1 else f"model{i}", item))
    labels = [label for label, _ in models]
    if len(set(labels)) < len(labels) or set(labels) & set(baseline.BASELINES + ("kernels", "screen")):
        raise ValueError(f"--model labels must be distinct and not a baseline's name: {labels}")
    return models


def task_prompts(ref, names, prompt, db_file, gpu_name):
    """{task: prompt text} for the tasks `names` (ref: {task: reference source}): the stage-1 prompt, or the
    contrastive one with the task's best prompting.NUM_EXEMPLARS kernels by speedup in db_file
    ({task: [{code, speedup, ...}]}, rl.py's exemplar database; none when the file does not exist). Raises ValueError
    for a malformed db_file."""
    db = common.read_json(db_file) if prompt == "contrastive" and db_file and os.path.exists(db_file) else {}

    def best(name):
        ranked = sorted(db.get(name, []), key=lambda e: -e["speedup"])
        return [(e["code"], e["speedup"]) for e in ranked[:prompting.NUM_EXEMPLARS]]
    return {n: prompting.stage1_prompt(ref[n], gpu_name) if prompt == "stage1"
            else prompting.contrastive_prompt(ref[n], best(n), gpu_name) for n in names}


def sample_answers(todo, samples, models, prompts, path, num_samples, device, seed, max_new_tokens, temperature):
    """Fill samples[(task, method)] with num_samples answers (code or None, why there is none) of each model
    [(method, name)], for the (task, method) pairs in todo: those already in samples.jsonl (`path`; a rerun
    continues), then new ones, sampled after torch.manual_seed(seed) from the same prompts ({task: text}) for every
    model and appended to samples.jsonl one by one. Exits with a one-line error for a model that cannot load."""
    import torch
    earlier = collections.defaultdict(list)  # (task, method, model) -> answers of an earlier run of this command
    for row in common.read_appended(path):
        if row.get("method"):
            earlier[(row["task"], row["method"], row.get("model"))].append((row.get("code"), row.get("error")))
    for method, name in models:
        need = {}
        for task in [t for t, m in todo if m == method]:
            samples[(task, method)] = earlier[(task, method, name)][:num_samples]
            if len(samples[(task, method)]) < num_samples:
                need[task] = num_samples - len(samples[(task, method)])
        if not need:
            continue
        try:
            model, tokenizer = load_model(name, device=device)
        except RuntimeError as e:  # load_model's one line: the model and the cause
            sys.exit(f"error: {e}")
        torch.manual_seed(seed)
        for count in sorted(set(need.values())):  # tasks that lack `count` answers (all, unless a run was stopped)
            group = [t for t in need if need[t] == count]
            answers = generate(model, tokenizer, [prompts[t] for t in group], count, max_new_tokens,
                                      temperature)
            for i, answer in enumerate(tqdm(answers, total=len(group) * count, desc=f"generate ({method})")):
                task = group[i // count]
                code, err = prompting.extract_code(answer["text"])
                if err:
                    err = "format error: " + err + (" (truncated at max_new_tokens)" if answer["truncated"] else "")
                samples[(task, method)].append((code, err))
                common.append_jsonl(path, dict(task=task, method=method, model=name, text=answer["text"],
                                               truncated=answer["truncated"], code=code, error=err))
        del model
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
