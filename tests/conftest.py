"""Shared pytest setup: tests marked `gpu` (pytest.ini) are skipped on machines without a CUDA GPU; the CPU tiny
run's first two stages (prepare.py + sft.py --preset=tiny_cpu, ~2-3 min on 2 cores) are built once per session and
copied by the tests that continue from them (test_tiny_cpu, test_sft_selftrain, test_rl_runs)."""
import os
import subprocess
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def pytest_collection_modifyitems(config, items):
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
    tmp = tmp_path_factory.mktemp("tiny_cpu_prepared")
    out = tmp / "run"
    env = dict(os.environ, CUDAL1_BUILD_ROOT=str(tmp / "build"), PYTHONUNBUFFERED="1")
    for stage in ("prepare.py", "sft.py"):
        p = subprocess.run([sys.executable, stage, "--preset=tiny_cpu", f"--out_dir={out}"], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=1200)
        assert p.returncode == 0, (stage, p.stdout[-3000:], p.stderr[-3000:])
    return out

