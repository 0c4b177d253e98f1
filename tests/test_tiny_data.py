"""Checks of the hand-written kernel variants for the tiny run (data/tiny_cuda, data/tiny_cpu).

CUDA variants cannot run here, so they are checked statically: metadata header, ModelNew and its
constructor, a torch-free cuda_sources (captured by importing the file with load_inline patched),
and an `nvcc -c` compile. CPU variants run: correct ones must match their task's reference on two
seeds, wrong ones must not, and each task's speed ladder must have a clear spread.
"""
import importlib.util
import inspect
import os
import re
import shutil
import subprocess
import tempfile
import time
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch
import torch.utils.cpp_extension as cpp_extension

ROOT = Path(__file__).resolve().parents[1]
CUDA_DIR = ROOT / "data" / "tiny_cuda"
CPU_DIR = ROOT / "data" / "tiny_cpu"
CPU_TASK_DIR = CPU_DIR / "tasks"

# constructor and forward parameters of the KernelBench Model of each CUDA task
CUDA_TASK_SIGNATURES = {
    "25_Swish": ([], ["x"]),
    "30_Softsign": ([], ["x"]),
    "36_RMSNorm_": (["num_features", "eps"], ["x"]),
    "38_L1Norm_": ([], ["x"]),
}
HEADER = [r"# @expect: (correct|wrong)$", r"# @design: \S.*$", r"# @analysis: \S.*$"]
TORCH_TOKEN = re.compile(r"\btorch\b|\bat::|\bc10\b|\bTensor\b|TORCH_")

CUDA_VARIANTS = sorted(CUDA_DIR.glob("*/*.py"))
CPU_TASKS = sorted(CPU_TASK_DIR.glob("*.py"))
CPU_VARIANTS = sorted(p for p in CPU_DIR.glob("*/*.py") if p.parent != CPU_TASK_DIR)


def _id(path):
    return f"{path.parent.name}/{path.stem}"


def expectation(path):
    return re.match(HEADER[0], path.read_text().splitlines()[0]).group(1)


def load_module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def capture_load_inline(path):
    """Import a CUDA variant with load_inline replaced by a recorder; return (module, kwargs)."""
    calls = []

    def fake_load_inline(*args, **kwargs):
        assert not args, "call load_inline with keyword arguments"
        calls.append(kwargs)
        return types.SimpleNamespace(**{f: None for f in kwargs.get("functions", [])})

    original = cpp_extension.load_inline
    cpp_extension.load_inline = fake_load_inline
    try:
        module = load_module(path, "tiny_cuda_" + path.parent.name + "_" + path.stem)
    finally:
        cpp_extension.load_inline = original
    assert len(calls) == 1, f"{path}: expected one load_inline call, got {len(calls)}"
    return module, calls[0]


def test_layout():
    assert sorted(p.name for p in CUDA_DIR.iterdir() if p.is_dir()) == sorted(CUDA_TASK_SIGNATURES)
    for task in CUDA_TASK_SIGNATURES:
        kinds = [expectation(p) for p in (CUDA_DIR / task).glob("*.py")]
        assert kinds.count("correct") >= 4 and kinds.count("wrong") >= 2, task
    assert len(CPU_TASKS) == 3
    for task in CPU_TASKS:
        kinds = [expectation(p) for p in (CPU_DIR / task.stem).glob("*.py")]
        assert 3 <= kinds.count("correct") <= 4 and 1 <= kinds.count("wrong") <= 2, task.stem


@pytest.mark.parametrize("path", CUDA_VARIANTS + CPU_VARIANTS, ids=_id)
def test_metadata_header(path):
    lines = path.read_text().splitlines()
    for line, pattern in zip(lines[:3], HEADER):
        assert re.match(pattern, line), f"{path}: bad header line {line!r}"
    assert re.search(r"^class ModelNew\(nn\.Module\):", path.read_text(), re.M)


@pytest.mark.parametrize("path", CUDA_VARIANTS, ids=_id)
def test_cuda_variant_sources(path):
    module, kw = capture_load_inline(path)
    init_params, forward_params = CUDA_TASK_SIGNATURES[path.parent.name]
    cls = module.ModelNew
    assert issubclass(cls, torch.nn.Module)
    assert list(inspect.signature(cls.__init__).parameters)[1:] == init_params
    assert list(inspect.signature(cls.forward).parameters)[1:] == forward_params
    cuda_src, cpp_src = kw["cuda_sources"], kw["cpp_sources"]
    assert isinstance(cuda_src, str) and isinstance(cpp_src, str)
    bad = sorted(set(TORCH_TOKEN.findall(cuda_src)))
    assert not bad, f"{path}: torch tokens in cuda_sources: {bad}"
    assert "__global__" in cuda_src and "<<<" in cuda_src
    assert kw["functions"] and all(re.search(r"\b%s\s*\(" % f, cpp_src) for f in kw["functions"])
    assert kw.get("verbose") is False


def test_cuda_variant_names_distinct():
    names = [capture_load_inline(p)[1]["name"] for p in CUDA_VARIANTS]
    assert len(names) == len(set(names)), names


def nvcc_compile(nvcc, source, workdir):
    """`nvcc -c -arch=sm_90` on one source text; returns (returncode, stderr)."""
    fd, name = tempfile.mkstemp(suffix=".cu", dir=workdir)
    with os.fdopen(fd, "w") as f:
        f.write(source)
    cmd = [nvcc, "-c", "-arch=sm_90", "-o", name[:-3] + ".o", name]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    return proc.returncode, proc.stderr


@pytest.fixture(scope="module")
def nvcc_results():
    """Compile every variant's cuda_sources. Fast path: one translation unit holding each variant
    verbatim in its own namespace (one nvcc front end instead of 24, ~5 s instead of ~40 s); if that
    fails, each variant is compiled on its own so the failures point at their files."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not on PATH; the CUDA compile check needs the CUDA toolkit")
    sources = {p: capture_load_inline(p)[1]["cuda_sources"] for p in CUDA_VARIANTS}
    workdir = tempfile.mkdtemp(prefix="tiny_cuda_nvcc_")
    try:
        unit = "#include <cstdio>\n" + "\n".join(
            f"namespace variant_{i} {{\n{src}\n}}  // namespace variant_{i}" for i, src in enumerate(sources.values()))
        rc, _ = nvcc_compile(nvcc, unit, workdir)
        if rc == 0:
            return {p: (0, "") for p in sources}
        with ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as pool:
            results = pool.map(lambda src: nvcc_compile(nvcc, src, workdir), sources.values())
            return dict(zip(sources, results))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.mark.parametrize("path", CUDA_VARIANTS, ids=_id)
def test_cuda_variant_compiles(path, nvcc_results):
    rc, err = nvcc_results[path]
    assert rc == 0, f"nvcc failed for {path}:\n{err}"


def build(task_path, variant_path=None):
    """Reference Model (or the variant's ModelNew) built the KernelBench way, after manual_seed(42)."""
    task = load_module(task_path, "tiny_cpu_task_" + task_path.stem)
    torch.manual_seed(42)
    if variant_path is None:
        return task, task.Model(*task.get_init_inputs())
    variant = load_module(variant_path, f"tiny_cpu_{task_path.stem}_{variant_path.stem}")
    return task, variant.ModelNew(*task.get_init_inputs())


@pytest.mark.parametrize("path", CPU_VARIANTS, ids=_id)
def test_cpu_variant_correctness(path):
    assert "load_inline" not in path.read_text() and "cpp_extension" not in path.read_text()
    task_path = CPU_TASK_DIR / f"{path.parent.name}.py"
    task, ref = build(task_path)
    _, new = build(task_path, path)
    matches = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        inputs = task.get_inputs()
        with torch.no_grad():
            expected, got = ref(*inputs), new(*inputs)
        assert type(got) is torch.Tensor
        matches.append(got.shape == expected.shape and torch.allclose(got, expected, atol=1e-2, rtol=1e-2))
    if expectation(path) == "correct":
        assert all(matches), f"{path} should match the reference on both seeds: {matches}"
    else:
        assert not any(matches), f"{path} is marked wrong but matches the reference: {matches}"


def median_ms(model, inputs, calls=20):
    with torch.no_grad():
        for _ in range(3):
            model(*inputs)
        times = []
        for _ in range(calls):
            start = time.perf_counter()
            model(*inputs)
            times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2] * 1e3


@pytest.fixture
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    # warm glibc malloc (as data/tiny_cpu/README.md): a freed 30 MiB block raises its mmap and trim
    # thresholds, so later MiB-sized temporaries reuse heap pages instead of faulting fresh ones
    block = torch.empty(30 * 2**20 // 4)
    del block
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("task_path", CPU_TASKS, ids=lambda p: p.stem)
def test_cpu_speed_ladder(task_path, one_thread):
    task, _ = build(task_path)
    torch.manual_seed(0)
    inputs = task.get_inputs()
    times = {}
    for path in sorted((CPU_DIR / task_path.stem).glob("*.py")):
        if expectation(path) == "correct":
            times[path.stem] = median_ms(build(task_path, path)[1], inputs)
    fastest, slowest = min(times.values()), max(times.values())
    assert slowest >= 1.3 * fastest, f"{task_path.stem}: no clear speed ladder {times}"


def test_sft_rows_pair_every_kernel_with_every_exemplar_pair():
    """seed_data.variants.sft_rows: with 4 correct and 2 wrong kernels and 12 prompts per kernel, each of the
    6 exemplar pairs leads to each of the 6 kernels exactly twice, so the SFT model prefers none after any prompt."""
    import collections
    import itertools
    import random
    from seed_data import variants
    seeds = [dict(task="t/a", variant=f"v{i}", code=f"class ModelNew:  # kernel {i}\n    pass\n", correct=i < 4,
                  speedup=1.0 + i if i < 4 else None, analysis="", design="") for i in range(6)]
    rows = variants.sft_rows([dict(name="t/a", src="class Model: pass\n")], seeds, random.Random(0), 12, "CPU")
    assert len(rows) == 6 * 12
    seen = collections.Counter()
    for r in rows:
        shown = tuple(i for i in range(4) if f"# kernel {i}\n" in r["prompt"])
        seen[(shown, r["source"])] += 1
    assert set(seen.values()) == {2} and len(seen) == 6 * 6, seen
    assert {p for p, _ in seen} == set(itertools.combinations(range(4), 2))
