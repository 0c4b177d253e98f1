"""
Kernels imported from files (prepare.py --import_kernels): the CUDA-L1 release format (level_id, task_id,
custom_code), this project's {task, code} lines (evaluate.py's results.jsonl, rl.py's samples) and rl.py's db.json,
matched to the task set, re-verified with bench.py on this device; the verified ones become seed kernels and
stage-1 SFT rows (the code in the answer format, "-" for the analysis and design they do not carry).
"""
import os

import common
import prompting
from evaluation import taskset
from seed_data.variants import result_line


def read_import(path, tasks):
    """[(task name, code, source)] from a kernels file: rl.py's db.json, or JSON lines in the CUDA-L1 release
    format or this project's {task, code} format (taskset.read_kernels; CUDA-L1 lines are matched to the task set
    by level and KernelBench id). Raises ValueError for a missing or malformed file."""
    if not os.path.exists(path):
        raise ValueError(f"import file {path!r} does not exist")
    source = f"import:{os.path.basename(path)}"
    if path.endswith(".json"):
        db = common.read_json(path)
        if not isinstance(db, dict) or not all(isinstance(v, list) for v in db.values()):
            raise ValueError(f"{path}: expected rl.py's db.json, {{task: [{{code, speedup}}, ...]}}")
        return [(name, e["code"], source) for name, entries in db.items() for e in entries if e.get("code")]
    kernel_rows = taskset.match_tasks(taskset.read_kernels(path), tasks)
    return [(k["task"], k["code"], source) for k in kernel_rows if k["code"]]


def import_kernels(paths, tasks, report_path, bench_kw, gpu_name):
    """Re-verify the kernels of the files `paths` that belong to training tasks (held-out tasks stay unseen) with
    bench.evaluate_many(bench_kw); returns (seed rows, SFT rows) of the verified ones. One line per kernel goes to
    report_path (JSON lines, rewritten). Raises ValueError for a missing or malformed file."""
    import bench
    by_name = {t["name"]: t for t in tasks}
    items = [item for path in paths for item in read_import(path, tasks)]
    known = [(n, c, s) for n, c, s in items if n in by_name]
    train = list({(n, c): (n, c, s) for n, c, s in known if by_name[n]["split"] == "train"}.values())  # dedupe
    print(f"import: {len(items)} kernels, {len(known)} of tasks in the task set, {len(train)} distinct on training "
          f"tasks (kernels of held-out tasks are not imported)")
    results = bench.evaluate_many([(n, by_name[n]["src"], c) for n, c, _ in train], progress=True, **bench_kw)
    seeds, rows = [], []
    if os.path.exists(report_path):
        os.remove(report_path)
    for i, ((name, code, source), res) in enumerate(zip(train, results)):
        common.append_jsonl(report_path, dict(task=name, source=source, status=res["status"],
                                              speedup=res.get("speedup"), error=(res.get("error") or "")[:300]))
        print(f"  {source:<32} {result_line(res)}")
        if res["status"] != "ok":
            continue
        seeds.append(dict(task=name, variant=f"{source}:{i}", code=code, expect="correct", design="", analysis="",
                          result=res, correct=True, speedup=res["speedup"], source=source))
        rows.append(dict(task=name, source=source, prompt=prompting.stage1_prompt(by_name[name]["src"], gpu_name),
                         response=prompting.format_response("-", "-", code)))
    print(f"import: {len(seeds)} of {len(train)} kernels verified on {bench_kw['device']}")
    return seeds, rows
