"""Shared pytest setup: tests marked `gpu` (pytest.ini) are skipped on machines without a CUDA GPU; the CPU tiny
run's first two stages (prepare.py + sft.py --preset=tiny_cpu, ~2-3 min on 2 cores) are built once per session and
copied by the tests that continue from them (test_tiny_cpu, test_sft_selftrain, test_rl_runs): once for all
pytest-xdist workers (a file lock in their shared temporary folder, as xdist's documentation shows)."""
import os
import subprocess
import sys

import pytest
import torch
from filelock import FileLock

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if os.environ.get("PYTEST_XDIST_WORKER"):   # workers share the cores: one thread each, for their own tensor work and
    os.environ.setdefault("OMP_NUM_THREADS", "1")   # the subprocesses they start (no OpenMP threads spinning against
    torch.set_num_threads(1)                         # another worker's)


# The longest files first (each is one unit of `--dist loadfile`; seconds on a busy 2-core box): started last, one of
# them alone would keep one worker busy minutes after the other ran out of files.
LONGEST_FIRST = ("test_rl_runs.py", "test_buildcache.py", "test_bench.py", "test_evaluate.py", "test_build_failures.py",
                 "test_bench_attacks.py", "test_interrupts.py", "test_tiny_cpu.py", "test_sft.py", "test_sft_selftrain.py")


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda it: rank.get(os.path.basename(str(it.fspath)), len(rank)))   # stable: file order kept
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def tiny_cpu_prepared(tmp_path_factory):
    """A read-only out_dir after `prepare.py --preset=tiny_cpu` and `sft.py --preset=tiny_cpu` (real subprocesses):
    tasks.jsonl, seed.jsonl, db.json, sft.jsonl, sft/. Copy it (shutil.copytree) to continue from it."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):           # workers share the parent of their own base folders
        root = root.parent
    tmp, out = root / "tiny_cpu_prepared", root / "tiny_cpu_prepared" / "run"
    with FileLock(str(root / "tiny_cpu_prepared.lock")):
        if (tmp / "done").exists():
            return out
        env = dict(os.environ, CUDAL1_BUILD_ROOT=str(tmp / "build"), PYTHONUNBUFFERED="1")
        for stage in ("prepare.py", "sft.py"):
            p = subprocess.run([sys.executable, stage, "--preset=tiny_cpu", f"--out_dir={out}"], cwd=ROOT, env=env,
                               capture_output=True, text=True, timeout=1200)
            assert p.returncode == 0, (stage, p.stdout[-3000:], p.stderr[-3000:])
        (tmp / "done").write_text("")
    return out
