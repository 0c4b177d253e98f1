"""The build cache (buildcache.py): main.cpp's precompiled header and light
prelude, the fall back to torch/extension.h, cuda.cu's lightened include, faults of the build itself, and the GPU
suites' sources compiled here (no GPU needed). Apart from test_bench.py so that pytest-xdist's `--dist loadfile`
can give them to another worker (both files took minutes)."""
import glob
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(ROOT, "tests", "fixtures")
sys.path.insert(0, ROOT)
import bench  # noqa: E402
from harness import buildcache  # noqa: E402

CPP_SRC = open(os.path.join(FIX, "cand_cpp_scale.py")).read().split('CPP_SRC = r"""')[1].split('"""')[0]


def src(name):
    return open(os.path.join(FIX, name)).read()


def test_cuda_prelude_choice():
    assert not buildcache._MENTIONS_TORCH.search("__global__ void k(float* x) { x[0] = FLOAT_MAX; }")
    for s in ("torch::Tensor f();", "at::Tensor f();", "AT_DISPATCH_FLOATING_TYPES(", "#include <ATen/ATen.h>",
              "C10_CUDA_KERNEL_LAUNCH_CHECK();", "c10::Half h;"):
        assert buildcache._MENTIONS_TORCH.search(s), s


@pytest.mark.slow
def test_pch_is_built_and_valid_for_the_real_compile(tmp_path, monkeypatch):
    """main.cpp's light prelude (buildcache._LIGHT_CPP: the tensor API and pybind11 without torch's C++ frontend) is
    precompiled once, its folder added to the build's include path, and GCC accepts the .gch for the exact flags
    ninja used (g++ -H marks a used PCH with '!'); the module works."""
    if not buildcache.cpp_extension.check_compiler_is_gcc(buildcache.cpp_extension.get_cxx_compiler()):
        pytest.skip("the PCH is for g++ only")
    monkeypatch.setenv("CUDAL1_BUILD_ROOT", str(tmp_path))
    monkeypatch.setenv("CUDAL1_PCH", "1")
    src_ = CPP_SRC.replace("2.0f", "5.0f")
    m = buildcache.cached_load_inline(name="cudal1_test_pch", cpp_sources=src_, functions=["scale_shift"])
    assert torch.equal(m.scale_shift(torch.ones(2)), torch.full((2,), 6.0))
    gch = [os.path.join(r, f) for r, _, fs in os.walk(tmp_path / "pch") for f in fs if f == "cudal1_light.h.gch"]
    assert len(gch) == 1, gch
    key = buildcache.build_key(buildcache.inline_args("cudal1_test_pch", src_, functions=["scale_shift"]))
    assert open(tmp_path / key / "main.cpp").read().startswith("#include <cudal1_light.h>")
    cflags = next(line for line in open(tmp_path / key / "build.ninja") if line.startswith("cflags = "))[9:]
    pch_dir = os.path.dirname(gch[0])
    assert f"-I{pch_dir}" in cflags
    probe = tmp_path / "probe.cpp"
    probe.write_text("#include <cudal1_light.h>\nint probe() { return 0; }\n")
    p = subprocess.run(f"c++ {cflags.strip()} -fsyntax-only -H {probe}", shell=True, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert f"! {gch[0]}" in p.stderr, p.stderr[:2000]


def test_light_prelude_falls_back_to_torch_extension_h(tmp_path, monkeypatch):
    """A C++ source that needs torch/all.h's C++ frontend (torch::nn) fails with the light prelude and is rebuilt
    with <torch/extension.h>, as plain load_inline would build it; a plain syntax error is not compiled twice."""
    monkeypatch.setenv("CUDAL1_BUILD_ROOT", str(tmp_path))
    monkeypatch.setenv("CUDAL1_PCH", "0")
    nn_src = ("torch::Tensor relu6(torch::Tensor x) {\n"
              "    return torch::nn::functional::hardtanh(\n"
              "        x, torch::nn::functional::HardtanhFuncOptions().min_val(0).max_val(6));\n}")
    m = buildcache.cached_load_inline(name="cudal1_test_nn", cpp_sources=nn_src, functions=["relu6"])
    assert torch.equal(m.relu6(torch.tensor([-1.0, 3.0, 9.0])), torch.tensor([0.0, 3.0, 6.0]))
    key = buildcache.build_key(buildcache.inline_args("cudal1_test_nn", nn_src, functions=["relu6"]))
    assert open(tmp_path / key / "main.cpp").read().startswith("#include <torch/extension.h>")


# ---- the GPU suites' sources compile (nvcc for CUDA, g++ for the C++ wrappers; no GPU needed) ----

_PROBE = r"""
import contextlib, importlib.util, json, os, sys
from torch.utils import cpp_extension
out, calls = {}, None

def stub(*a, **kw):
    calls.append(dict(zip(["name", "cpp_sources", "cuda_sources"], a), **kw))
    raise RuntimeError("stub")
cpp_extension.load_inline = stub
for path in sys.argv[1:]:
    calls = out[path] = []
    spec = importlib.util.spec_from_file_location("probe_" + os.path.basename(path)[:-3], path)
    with contextlib.suppress(RuntimeError, NameError, AttributeError):
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
print("PROBE" + json.dumps(out, default=repr))
"""


def _inline_sources(paths):
    """{path: [load_inline keyword arguments]} of candidate files, captured by importing them with a stub loader
    in ONE child process: the hack files patch torch globals (torch.allclose, backend flags) at import, which
    would poison every later test of this pytest process."""
    p = subprocess.run([sys.executable, "-c", _PROBE, *paths], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.split("PROBE", 1)[1])


def test_gpu_suite_sources_compile(tmp_path):
    """Every CUDA source of tests/legit and tests/hacks through `nvcc -c -arch=sm_90` with bench's light prelude,
    and every C++ wrapper through g++ -fsyntax-only with torch/extension.h (one translation unit, a namespace
    each): typos fail here, not on the GPU machine. The deliberately broken fallback hack must fail."""
    import shutil
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not on PATH")
    files = sorted(glob.glob(os.path.join(ROOT, "tests", "legit", "*.py")) +
                   glob.glob(os.path.join(ROOT, "tests", "hacks", "*.py")))
    cpp_tu, cuda_jobs = ["#include <torch/extension.h>"], []
    calls = _inline_sources(files)
    for f in files:
        for i, c in enumerate(calls[f]):
            stem = f"{os.path.basename(os.path.dirname(f))}_{os.path.basename(f)[:-3]}_{i}"
            if c.get("cuda_sources"):
                cu = tmp_path / f"{stem}.cu"
                cu.write_text("\n".join(buildcache._LIGHT_PRELUDE + [c["cuda_sources"]]))
                cuda_jobs.append((stem, cu))
            if "c10/cuda" not in c["cpp_sources"]:        # the CPU torch build has no CUDA headers
                cpp_tu += [f"namespace {stem} {{", c["cpp_sources"], "}"]
    assert len(cuda_jobs) >= 10, cuda_jobs

    def compile_cu(job):
        stem, cu = job
        p = subprocess.run([nvcc, "-c", "-arch=sm_90", "-o", str(cu)[:-3] + ".o", str(cu)], capture_output=True,
                           text=True, timeout=300)
        return stem, p.returncode, p.stderr
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(compile_cu, cuda_jobs))
    for stem, rc, err in results:
        if stem.startswith("hacks_try_except_fallback"):
            assert rc != 0, "the fallback hack's kernel must not compile"
        else:
            assert rc == 0, (stem, err[-2000:])
    tu = tmp_path / "wrappers.cpp"
    tu.write_text("\n".join(cpp_tu))
    import sysconfig
    inc = buildcache.cpp_extension.include_paths() + [sysconfig.get_paths()["include"]]
    p = subprocess.run(["c++", "-std=c++17", "-fsyntax-only", *[f"-I{d}" for d in inc], str(tu)],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]


# ---- faults of the build itself ----

def test_killed_build_leaves_no_trap_and_concurrent_builds_do_not_collide(tmp_path, monkeypatch):
    """A build killed at its timeout (mid-compile: the child's whole process group, g++ included) must leave
    nothing that makes the next build of the same source wait or fail; then three concurrent builds of that
    source all succeed, one of them compiling and the others loading its result (one .so on disk)."""
    monkeypatch.setenv("CUDAL1_PCH", "0")
    cand = src("cand_cpp_scale.py").replace("2.0f", "7.0f").replace("cudal1_test_scale", "cudal1_test_fault")
    root = str(tmp_path)
    killed = bench.build(cand, device="cpu", build_root=root, timeout_s=8)
    assert killed["status"] == "timeout", killed
    leftovers = os.listdir(root)
    assert leftovers, "the killed build should have started (a build folder and its .lock)"
    t0 = time.time()
    with ThreadPoolExecutor(3) as pool:
        again = list(pool.map(lambda _: bench.build(cand, device="cpu", build_root=root, timeout_s=600), range(3)))
    assert [r["status"] for r in again] == ["ok"] * 3, again
    assert time.time() - t0 < 590                                          # nobody waited on a dead builder
    sos = glob.glob(os.path.join(root, "candidates", "*", "*", "cudal1_test_fault_*.so"))   # the candidate's entries
    assert len(sos) == 1, sos
    assert os.path.exists(os.path.join(os.path.dirname(sos[0]), "done"))


def test_lighten_cuda_drops_only_a_removable_torch_extension_include():
    """buildcache.lighten_cuda: a CUDA source's own torch/extension.h becomes a comment (same line
    count: compiler errors keep their line numbers); sources that may need pybind11 or the C++ frontend, or that do
    not include it, are left alone (None)."""
    src_ = "#include <torch/extension.h>\n  # include \"torch/extension.h\" // again\n__global__ void k(float* x) {}\n"
    got = buildcache.lighten_cuda(src_)
    assert got is not None and "#include <torch/extension.h>" not in got.replace("// #include", "")
    assert got.count("\n") == src_.count("\n") and got.endswith("__global__ void k(float* x) {}\n")
    assert buildcache.lighten_cuda(src_ + "PYBIND11_MODULE(m, m_) {}\n") is None
    assert buildcache.lighten_cuda(src_ + "torch::nn::Linear l(1, 1);\n") is None
    assert buildcache.lighten_cuda("#include <cuda_runtime.h>\n") is None


def test_lightened_cuda_source_is_retried_as_written(tmp_path, monkeypatch):
    """The build cache's first try compiles cuda.cu without the source's own torch/extension.h; when that fails in
    cuda.cu, the second try is the source exactly as written (under load_inline's prelude), so nothing plain
    load_inline builds is rejected. Control flow only: torch's builder is replaced by one that fails once."""
    monkeypatch.setenv("CUDAL1_PCH", "0")
    seen = []

    class Built:
        __name__ = "t_mod"

    def fake_load(name, sources, **kw):
        seen.append(open(sources[1]).read())
        if len(seen) == 1:
            raise RuntimeError("error building extension: cuda.cu(3): error: identifier \"py\" is undefined")
        return Built()
    monkeypatch.setattr(buildcache.cpp_extension, "load", fake_load)
    cuda = ("#include <torch/extension.h>\n__global__ void k(float* x) {}\n"
            "torch::Tensor f(torch::Tensor x) { return x; }")
    args = buildcache.inline_args("t", "", cuda, functions=["f"])
    out = buildcache._compile_extension(args, str(tmp_path), "t_mod", False, str(tmp_path))
    assert isinstance(out, Built) and len(seen) == 2
    assert "#include <torch/types.h>" in seen[0] and "\n#include <torch/extension.h>" not in seen[0]
    assert seen[1].endswith(cuda) and "#include <torch/types.h>" in seen[1]


def test_load_of_a_fresh_temp_folder_builds_once(tmp_path):
    """cpp_extension.load of a source written into a fresh temp folder at import (buildcache.cached_load): the build
    ahead compiles it into the candidate's own entries; the timed runner writes it into another temp folder and
    loads that build (its .so untouched: no second compile under the GPU's lock); the verdict is ok."""
    cand, task, root = src("cand_cpp_load_tempdir.py"), src("cpu_task_scale.py"), str(tmp_path)
    built = bench.build(cand, device="cpu", build_root=root, timeout_s=600)
    assert built["status"] == "ok", (built["status"], built["error"])
    sos = glob.glob(os.path.join(root, "candidates", "*", "*", "cudal1_test_load_tempdir_*.so"))
    assert len(sos) == 1, sos
    mtime = os.stat(sos[0]).st_mtime_ns
    r = bench.evaluate(task, cand, device="cpu", build_root=root, time_budget_s=0.2, num_correct_trials=1)
    assert r["status"] == "ok" and r["custom_kernel_calls"], (r["status"], r["error"])
    assert os.stat(sos[0]).st_mtime_ns == mtime, "the timed runner compiled the extension again"
