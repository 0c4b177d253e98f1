"""rl.py does not train on tasks prepare.py's screen found degenerate (REFERENCE.md §3) unless
--train_degenerate=True: a real subprocess on a copy of the session's tiny_cpu out_dir (conftest.py)."""
import json
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ARGS = ["--preset=tiny_cpu", "--prepare_if_missing=False", "--run_evaluate=False", "--max_steps=0"]


def _mark(d, names):
    path = os.path.join(d, "tasks.jsonl")
    rows = [json.loads(line) for line in open(path)]
    for r in rows:
        r["degenerate"] = r["name"] in names
    with open(path, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    return [r["name"] for r in rows if r["split"] == "train"]


def _rl(d, *extra):
    return subprocess.run([sys.executable, "rl.py", *ARGS, f"--out_dir={d}", *extra], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, env=dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1"))


def test_degenerate_tasks_are_not_trained_on(tiny_cpu_prepared, tmp_path):
    d = tmp_path / "out"
    shutil.copytree(tiny_cpu_prepared, d, ignore=shutil.ignore_patterns("rl"))
    train = _mark(d, set())
    assert len(train) >= 2
    _mark(d, set(train))                                   # every training task degenerate: nothing to train on
    p = _rl(d)
    assert p.returncode != 0 and "that are not degenerate" in p.stderr + p.stdout, (p.stdout[-2000:], p.stderr[-2000:])
    _mark(d, {train[0]})                                   # one of them: left out, and said so
    p = _rl(d)
    assert p.returncode == 0, (p.stdout[-2000:], p.stderr[-2000:])
    assert f"not training on 1 degenerate tasks (prepare.py's screen; --train_degenerate=True to include them): " \
           f"{train[0]}" in p.stdout
    assert f"{len(train) - 1} tasks;" in p.stdout
    p = _rl(d, "--train_degenerate=True")                  # asked to: all of them
    assert p.returncode == 0, p.stdout[-2000:]
    assert "not training on" not in p.stdout and f"{len(train)} tasks;" in p.stdout, p.stdout[-2000:]
