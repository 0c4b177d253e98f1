"""
The task set and kernels files: what prepare.py and evaluate.py both read (one place, so that neither stage script
imports the other).

A task is a KernelBench-style module (REFERENCE.md §2): `Model`, `get_inputs`, `get_init_inputs`. Task rows are
{name, level, file, src}: "level1/25_Swish" for a file of KernelBench's level1/ folder, "<folder>/<stem>" (level 0)
for a flat folder of task files such as the project-written CPU tasks (data/tiny_cpu/tasks). prepare.py adds split,
degenerate and ref_ms and writes the rows to out_dir/tasks.jsonl, which the other stages read.

A kernels file has one JSON object per line, either this project's {"task", "code"[, "ref_code"]} or a line of the
CUDA-L1 release (level_id, task_id, ref_code, custom_code, score_*: REFERENCE.md §1.6).
"""
import ast
import glob
import io
import itertools
import os
import re
import tarfile
import urllib.request

import common

# where KernelBench's task files are looked for when no --kernelbench_dir is given
KERNELBENCH_DEFAULT = os.environ.get("KERNELBENCH_DIR") or os.path.join(common.ROOT, "..", "shared", "kernelbench")


def find_kernelbench():
    """KERNELBENCH_DEFAULT when that folder exists, else "" (the caller then needs another task source)."""
    return KERNELBENCH_DEFAULT if os.path.isdir(KERNELBENCH_DEFAULT) else ""


def download_kernelbench(url, dest):
    """Download the KernelBench repository tarball at url and unpack its KernelBench/level*/ task files into dest
    (standard library only). Raises RuntimeError naming the URL and the cause when the download fails."""
    print(f"downloading {url} ...")
    try:
        data = urllib.request.urlopen(url, timeout=120).read()
    except OSError as e:
        raise RuntimeError(f"cannot download KernelBench from {url} ({e}); pass --kernelbench_dir=PATH to a local "
                           "copy") from None
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        for member in tar.getmembers():
            parts = member.name.split("/")
            if member.isfile() and len(parts) == 4 and parts[1] == "KernelBench" and parts[2].startswith("level"):
                os.makedirs(os.path.join(dest, parts[2]), exist_ok=True)
                with open(os.path.join(dest, parts[2], parts[3]), "wb") as f:
                    f.write(tar.extractfile(member).read())


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
    if any(os.path.isdir(os.path.join(root, f"level{level}")) for level in level_list):
        for level in level_list:
            files += [(level, p, f"level{level}/{os.path.basename(p)[:-3]}")
                      for p in sorted(glob.glob(os.path.join(root, f"level{level}", "*.py")))]
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
    for level, path, name in files:
        src = open(path).read()
        check_task(path, src)
        rows.append(dict(name=name, level=level, file=os.path.abspath(path), src=src))
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
                raise ValueError(f"{where}: neither {{'task', 'code'}} nor a CUDA-L1 line (level_id, task_id); "
                                 f"got {got}")
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


def select_tasks(tasks, levels, split, task_names, tasks_file):
    """The task rows chosen by evaluate.py's --task_names (a comma list, overriding the rest), else --levels (a comma
    list of ints) and --split (train | eval | all), sorted by level and KernelBench id. Raises ValueError for an
    unknown name, a split asked of rows without one (tasks_file named as the file that should hold it), or an empty
    selection."""
    if task_names:
        wanted = [s.strip() for s in task_names.split(",") if s.strip()]
        unknown = set(wanted) - {t["name"] for t in tasks}
        if unknown:
            raise ValueError(f"unknown task names {sorted(unknown)}")
        tasks = [t for t in tasks if t["name"] in wanted]
    else:
        level_set = {int(x) for x in str(levels).split(",") if x.strip()}
        tasks = [t for t in tasks if t["level"] in level_set]
        if split != "all":
            if any(t.get("split") is None for t in tasks):
                why = "has no split field" if os.path.exists(tasks_file) else "does not exist"
                raise ValueError(f"--split={split} needs the split that prepare.py writes into {tasks_file}, which "
                                 f"{why}; give the --out_dir (or --preset) of a prepared run, or --split=all")
            tasks = [t for t in tasks if t["split"] == split]
    if not tasks:
        raise ValueError(f"no tasks left after the selection (levels={levels!r}, split={split!r}, "
                         f"task_names={task_names!r})")
    return sorted(tasks, key=lambda t: (t["level"], task_id_of(t["name"]) or 0, t["name"]))


def interleave(tasks):
    """Measuring order: level by level in turn (L1 #1, L2 #1, L3 #1, L1 #2, ...), so a run stopped early covers
    every level."""
    by_level = [[t for t in tasks if t["level"] == level] for level in sorted({t["level"] for t in tasks})]
    return [t for group in itertools.zip_longest(*by_level) for t in group if t]
