"""Shared pytest setup: tests marked `gpu` (pytest.ini) are skipped on machines without a CUDA GPU; the CPU tiny
run's first two stages (prepare.py + sft.py --preset=tiny_cpu, ~2-3 min on 2 cores) are built once per session and
copied by the tests that continue from them (test_tiny_cpu, test_sft_selftrain, test_rl_runs): once for all
pytest-xdist workers (a file lock in their shared temporary folder, as xdist's documentation shows).

Under CI (the environment variable CI set, as CI services and .ci/run set it) a test skipped for any reason but the
ones in ALLOWED_SKIPS fails the run: a missing KernelBench, CUDA-L1 sample, committed run or nvcc would otherwise
turn dozens of hack and attack tests into skips and leave CI green without having run them."""
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


# The order in which pytest-xdist hands out the files under `--dist loadfile` (each file is one unit; files not
# named follow in collection order): longest first, by their seconds on 2 cores (CI runs, single-file timings), so
# that no long file starts last and keeps one worker busy after the other ran out of work. test_rl_runs.py leads:
# its first test makes tiny_cpu_prepared (below, ~1.5-2 min), and the other files that use it (test_fsdp,
# test_tiny_cpu, test_sft_selftrain, test_rl_degenerate) come after test_buildcache.py (~3 min, on the other worker),
# when it is made, instead of waiting for its lock while the other worker makes it.
LONGEST_FIRST = ("test_rl_runs.py", "test_buildcache.py", "test_bench.py", "test_interrupts.py", "test_fsdp.py",
                 "test_readme_run.py", "test_bench_attacks.py", "test_build_failures.py", "test_evaluate.py",
                 "test_tiny_cpu.py", "test_errors.py", "test_cli.py", "test_ci_skips.py", "test_sft_selftrain.py",
                 "test_rl_scale.py", "test_rl_ddp.py", "test_sft.py", "test_prepare_teachers.py", "test_sampler.py",
                 "test_rl_vllm.py", "test_rl_degenerate.py", "test_scan_writes.py", "test_cores.py", "test_rl.py",
                 "test_sandbox.py", "test_gate.py", "test_sft_ddp.py", "test_sft_interrupt.py", "test_sft_speed.py")


def pytest_configure(config):
    # xdist hands out the files with the most tests first unless told not to (its --loadscope-reorder, on by
    # default), which put the one-test files of whole runs (test_tiny_cpu, test_readme_run, ...) last
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda it: rank.get(os.path.basename(str(it.fspath)), len(rank)))   # stable: file order kept
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


# The only reasons a test may be skipped under CI, exactly as the skips give them: the CI machine has no CUDA GPU
# (the `gpu` marker, pytest_collection_modifyitems above), and vLLM is not installed there (test_rl_vllm.py).
ALLOWED_SKIPS = ("needs a CUDA GPU", "vLLM not installed")
DISALLOWED_SKIPS = []   # (test or collector id, reason) of the other skips seen in this session


def under_ci():
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def skip_reason(report):
    """The reason a skipped report gives: pytest keeps (file, line, "Skipped: reason") as its longrepr."""
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return reason[len("Skipped: "):] if reason.startswith("Skipped: ") else reason


def note_skip(report):
    # xdist replays its workers' reports on the controller, which alone decides the exit status: counted there
    if report.skipped and not hasattr(report, "wasxfail") and skip_reason(report) not in ALLOWED_SKIPS:
        DISALLOWED_SKIPS.append((report.nodeid, skip_reason(report)))


def pytest_runtest_logreport(report):
    note_skip(report)


def pytest_collectreport(report):     # a whole module skipped at import (pytest.importorskip, allow_module_level)
    note_skip(report)


def pytest_sessionfinish(session, exitstatus):
    if under_ci() and DISALLOWED_SKIPS and not hasattr(session.config, "workerinput") and \
            exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if under_ci() and DISALLOWED_SKIPS:
        terminalreporter.section("skips CI does not allow", sep="=", red=True, bold=True)
        for nodeid, reason in DISALLOWED_SKIPS:
            terminalreporter.line(f"SKIPPED {nodeid}: {reason}", red=True)
        terminalreporter.line(f"CI is set: {len(DISALLOWED_SKIPS)} test(s) skipped for a reason other than "
                              f"{' or '.join(repr(r) for r in ALLOWED_SKIPS)}; the run fails (tests/conftest.py)",
                              red=True, bold=True)


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
