"""
The task set and kernels files: what prepare.py and evaluate.py both read (issue 14 item 7: one place, no import
circle between the stage scripts).

A task is a KernelBench-style module (REFERENCE.md §2): `Model`, `get_inputs`, `get_init_inputs`. Task rows are
{name, level, file, src}: "level1/25_Swish" for a file of KernelBench's level1/ folder, "<folder>/<stem>" (level 0)
for a flat folder of task files such as the project-written CPU tasks (data/tiny_cpu/tasks). prepare.py adds split,
degenerate and ref_ms and writes the rows to out_dir/tasks.jsonl, which the other stages read.

A kernels file has one JSON object per line, either this project's {"task", "code"[, "ref_code"]} or a line of the
CUDA-L1 release (level_id, task_id, ref_code, custom_code, score_*: REFERENCE.md §1.6).
"""
import ast
import glob
import os
import re

import common

# where KernelBench's task files are looked for when no --kernelbench_dir is given
KERNELBENCH_DEFAULT = os.environ.get("KERNELBENCH_DIR") or os.path.join(common.ROOT, "..", "shared", "kernelbench")


def find_kernelbench():
    """KERNELBENCH_DEFAULT when that folder exists, else "" (the caller then needs another task source)."""
    return KERNELBENCH_DEFAULT if os.path.isdir(KERNELBENCH_DEFAULT) else ""


def level_of(name):
    """1 for "level1/25_Swish"; None for a name without a level."""
    m = re.match(r"level(\d+)/", name)
    return int(m.group(1)) if m else None


def task_id_of(name):
    """KernelBench's problem id: 25 for "level1/25_Swish" (and for CUDA-L1's "level1/25"); None without one."""
    m = re.match(r"(\d+)(_|$)", name.rsplit("/", 1)[-1])
    return int(m.group(1)) if m else None


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


def load_tasks(root, level_list, names=()):
    """Task rows {name, level, file, src} from a KernelBench folder (level1/, level2/, ... inside) or a flat folder
    of task files (level 0, names "<folder>/<stem>"). level_list: ints; names: keep only these (all must exist).
    Raises ValueError naming the folder or file for a missing folder, unknown names or a file that is no task."""
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


def read_task_set(tasks_file, kernelbench_dir, level_list):
    """Task rows {name, level, src, split}: prepare.py's tasks_file when it exists, else the task files of a
    KernelBench folder (split None: no train/eval split), else None. Raises ValueError for a malformed file."""
    if tasks_file and os.path.exists(tasks_file):
        rows = common.read_jsonl(tasks_file)
        for n, r in enumerate(rows, 1):
            if not (isinstance(r, dict) and {"name", "level", "src"} <= set(r)):
                raise ValueError(f"{tasks_file}: row {n} is not a task row {{name, level, src, ...}} (prepare.py "
                                 "writes them)")
        return rows
    if kernelbench_dir:
        return [dict(r, split=None) for r in load_tasks(kernelbench_dir, level_list)]
    return None


def read_kernels(path):
    """Rows {task, level, task_id, code, ref_code, published} of a kernels file; code is None where a line holds no
    kernel (CUDA-L1's null or "None"). The two formats are told apart per line. CUDA-L1 lines are named
    "level{L}/{task_id}" until match_tasks gives them the task set's name ("level1/25_Swish").
    Raises ValueError "<file>:<line>: <what is wrong>" for a line that is not JSON or is neither format."""
    rows = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            where = f"{path}:{n}"
            r = common.parse_json_line(line, where)
            if isinstance(r, dict) and "level_id" in r and "task_id" in r:
                try:
                    level, tid = int(r["level_id"]), int(r["task_id"])
                except (TypeError, ValueError):
                    raise ValueError(f"{where}: level_id and task_id must be integers, not {r['level_id']!r}, "
                                     f"{r['task_id']!r}") from None
                row = dict(task=f"level{level}/{tid}", level=level, task_id=tid, code=r.get("custom_code"),
                           ref_code=r.get("ref_code"), published={k: v for k, v in r.items() if k.startswith("score_")})
            elif isinstance(r, dict) and isinstance(r.get("task"), str):
                row = dict(task=r["task"], level=level_of(r["task"]), task_id=task_id_of(r["task"]), code=r.get("code"),
                           ref_code=r.get("ref_code"), published={})
            else:
                got = f"keys {sorted(r)[:6]}" if isinstance(r, dict) else f"a JSON {type(r).__name__}"
                raise ValueError(f"{where}: neither {{'task', 'code'}} nor a CUDA-L1 line (level_id, task_id); got {got}")
            if not isinstance(row["code"], str) or row["code"].strip() in ("", "None", "null"):
                row["code"] = None
            if not isinstance(row["ref_code"], str) or not row["ref_code"].strip():
                row["ref_code"] = None
            rows.append(row)
    return rows


def match_tasks(krows, tasks):
    """Rename kernel rows named "level{L}/{id}" to the task set's name with that level and KernelBench id."""
    names = {t["name"] for t in tasks}
    by_id = {(t["level"], task_id_of(t["name"])): t["name"] for t in tasks}
    for k in krows:
        if k["task"] not in names and (k["level"], k["task_id"]) in by_id:
            k["task"] = by_id[(k["level"], k["task_id"])]
    return krows
