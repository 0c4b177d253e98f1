"""conftest.py's CI rule: with the environment variable CI set, a test skipped for a reason other than a missing CUDA
GPU or vLLM fails the run (exit status 1, the skips listed); allowed skips, xfails and runs without CI pass. Real
pytest subprocesses on tiny test files next to a copy of tests/conftest.py, alone and under pytest-xdist (CI runs
`-n 2`)."""
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

ALLOWED = '''
import pytest


@pytest.mark.gpu
def test_on_a_gpu():          # on a machine without CUDA, conftest skips it: "needs a CUDA GPU"
    assert 1 + 1 == 2


def test_vllm():
    pytest.skip("vLLM not installed")


@pytest.mark.xfail(reason="a known bug", strict=True)
def test_known_bug():
    assert 1 + 1 == 3


def test_plain():
    assert 2 * 2 == 4
'''
DISALLOWED = '''
import pytest


def test_needs_data():
    pytest.skip("KernelBench not found at /nowhere (set KERNELBENCH_DIR)")


@pytest.mark.skipif(True, reason="needs nvcc")
def test_needs_nvcc():
    pass


def test_plain():
    assert 2 * 2 == 4
'''
MODULE_SKIP = '''
import pytest

pytest.importorskip("no_such_module_for_the_ci_rule")


def test_never_collected():
    pass
'''


def pytest_in(folder, files, ci, *args):
    """Runs pytest on `files` ({name: source}) in `folder` beside a copy of tests/conftest.py; CI set or unset."""
    for name, text in files.items():
        (folder / name).write_text(text)
    shutil.copy(os.path.join(ROOT, "tests", "conftest.py"), folder / "conftest.py")
    (folder / "pytest.ini").write_text("[pytest]\nmarkers =\n    gpu: needs a CUDA GPU\n")
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER")}
    if ci:
        env["CI"] = "true"
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", *args, str(folder)],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=300)


def test_ci_passes_allowed_skips_and_xfails(tmp_path):
    p = pytest_in(tmp_path, {"test_allowed.py": ALLOWED}, ci=True)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "skips CI does not allow" not in p.stdout
    assert "1 xfailed" in p.stdout and "passed" in p.stdout, p.stdout[-2000:]


def test_ci_fails_a_run_with_other_skips_and_names_them(tmp_path):
    files = {"test_disallowed.py": DISALLOWED, "test_module_skip.py": MODULE_SKIP}
    p = pytest_in(tmp_path, files, ci=True)
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-3000:]
    out = p.stdout
    assert "skips CI does not allow" in out and "3 test(s) skipped for a reason other than" in out, out[-3000:]
    assert "test_disallowed.py::test_needs_data: KernelBench not found at /nowhere (set KERNELBENCH_DIR)" in out
    assert "test_disallowed.py::test_needs_nvcc: needs nvcc" in out, out[-3000:]
    assert "test_module_skip.py: could not import 'no_such_module_for_the_ci_rule'" in out, out[-3000:]
    # without CI the same skips are skips
    p = pytest_in(tmp_path, files, ci=False)
    assert p.returncode == 0 and "skips CI does not allow" not in p.stdout, p.stdout[-3000:]
    assert "1 passed, 3 skipped" in p.stdout, p.stdout[-2000:]


def test_ci_rule_holds_under_xdist(tmp_path):
    """The controller decides the exit status: the workers' skips reach it as replayed reports."""
    p = pytest_in(tmp_path, {"test_disallowed.py": DISALLOWED, "test_allowed.py": ALLOWED}, True, "-n", "2")
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-3000:]
    assert "2 test(s) skipped for a reason other than" in p.stdout, p.stdout[-3000:]
    (tmp_path / "test_disallowed.py").unlink()
    p = pytest_in(tmp_path, {"test_allowed.py": ALLOWED}, True, "-n", "2")
    assert p.returncode == 0 and "skips CI does not allow" not in p.stdout, p.stdout[-3000:] + p.stderr[-3000:]
