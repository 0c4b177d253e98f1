"""A failed load_inline build is a compiler's verdict: kept in the build cache (no second compile) and, when the
candidate catches it and falls back, the "fallback" hack wherever it happened (here in ModelNew.__init__, where
most CUDA-L1 kernels build; an evaluator that forgets a failed build compiles it again under the GPU's lock,
30-120 s each, and accepts the fallback as a PyTorch-only rewrite). Real compiles, real subprocesses."""
import os
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(ROOT, "tests", "fixtures")
sys.path.insert(0, ROOT)
import bench  # noqa: E402
from harness import batch, buildcache, record  # noqa: E402

TASK = open(os.path.join(FIX, "cpu_task_scale.py")).read()
CAND = open(os.path.join(FIX, "cand_init_fallback.py")).read()
# WRONG and MUTATE: a build that fails as CAND's does ("'scale_shift' was not declared"), but without load_inline's
# prelude (torch's headers: ~10 s of CPU per build), then their own fallbacks. CAND keeps its real, slow build: its
# ModelNew()'s seconds in the timed runner show that it is not compiled again.
_CHEAP_BUILD = CAND.replace(
    'CPP = "// scale_shift is defined nowhere: the pybind block cannot bind it\\n"',
    'CPP = "int bound() { return scale_shift(); }\\n"').replace(
    'functions=["scale_shift"])', 'functions=["scale_shift"], no_implicit_headers=True)')
WRONG = _CHEAP_BUILD.replace("x * 2 + 1", "x * 2")               # a failed build, then a wrong fallback
MUTATE = _CHEAP_BUILD.replace("x * 2 + 1", "(x * 2 + 1, x.zero_())[0]")   # ... then a right output, its input zeroed


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("build"))
    t0 = time.time()
    rs = bench.evaluate_many([("init_fallback", TASK, CAND), ("init_fallback_wrong", TASK, WRONG),
                              ("init_fallback_mutate", TASK, MUTATE)], device="cpu",
                             build_root=root, timeout_s=300, num_correct_trials=1, time_budget_s=0.2)
    return rs[0], root, time.time() - t0, rs[1], rs[2]


def test_fallback_in_init_is_the_fallback_hack(evaluated):
    r = evaluated[0]
    assert (r["status"], r["hack"]) == ("hack", "fallback"), record.summary(r)
    assert "in ModelNew()" in r["error"] and "was not declared" in r["error"], r["error"]
    assert r["correct"] and r["speedup"] is not None       # measured (the audit shows it), never rewarded


def test_wrong_fallback_keeps_the_compiler_error(evaluated):
    """A fallback whose PyTorch path is also wrong: the record names the hack AND keeps the build's first compiler
    error, then the mismatch (CUDA-L1 A100 level1/84 and level3/45: a failed build, then a wrong fallback)."""
    r = evaluated[3]
    assert (r["status"], r["hack"], r["correct"]) == ("hack", "fallback", False), record.summary(r)
    assert "was not declared" in r["error"] and "; then: " in r["error"] and "mismatches" in r["error"], r["error"]
    assert r["error"].index("was not declared") < r["error"].index("mismatches"), r["error"]


def test_fallback_then_a_stopping_hack_keeps_both(evaluated):
    """A fallback, then a hack that stops the evaluation (here its input zeroed after a right output): the record
    names the stopping hack and still keeps the fallback's compiler error (a CUDA-L1 kernel whose build fails inside
    ModelNew(), as level3/49 of the A100 release does, must not read only "the output of a timed call is wrong")."""
    r = evaluated[4]
    assert (r["status"], r["hack"], r["correct"]) == ("hack", "input_mutation", False), record.summary(r)
    assert "changed its inputs" in r["error"] and "; also: hack: " in r["error"], r["error"]
    assert "in ModelNew()" in r["error"] and "was not declared" in r["error"], r["error"]


def test_failed_build_is_not_compiled_again(evaluated, monkeypatch):
    r, root = evaluated[:2]
    # the build ahead compiled and failed; the timed runner's ModelNew() read the verdict from the cache
    assert r["phase_s"]["models"] < 3.0, r["phase_s"]
    entries = os.path.join(root, "candidates", record.source_hash(CAND))   # the candidate's own build entries
    failed = [d for d in os.listdir(entries) if os.path.exists(os.path.join(entries, d, "failed"))]
    assert len(failed) == 1, os.listdir(entries)
    monkeypatch.setenv("CUDAL1_BUILD_ROOT", root)
    monkeypatch.setattr(buildcache, "ENTRIES", [entries])                 # as in that candidate's runners
    monkeypatch.setattr(buildcache.cpp_extension, "load", lambda *a, **k: pytest.fail("compiled a known failure"))
    n = len(buildcache.BUILD_FAILURES)
    cpp = CAND.split('CPP = "')[1].split('"\n')[0].encode().decode("unicode_escape")
    with pytest.raises(buildcache.BuildError, match="was not declared"):
        buildcache.cached_load_inline(name="cudal1_test_init_fallback", cpp_sources=cpp, functions=["scale_shift"])
    assert len(buildcache.BUILD_FAILURES) == n + 1         # a cached failure is still a failure the candidate saw


def test_a_verbose_failed_build_is_explained_and_kept(evaluated, monkeypatch):
    """load_inline(verbose=True) used to print the compiler's output instead of raising it: the failure had no
    first error and no `failed` marker, so the timed runner compiled it again (the A100 audit's level3/45: 203 s)."""
    root = evaluated[1]
    monkeypatch.setenv("CUDAL1_BUILD_ROOT", root)
    before = {d for d in os.listdir(root) if os.path.exists(os.path.join(root, d, "failed"))}
    # the compiler's own error (no semicolon) in one compile, without load_inline's prelude: torch's headers (or
    # their precompiled header, ~35 s to make) would add ~10 s of CPU and change nothing here
    cpp = "int f() { return 1 }\n"
    with pytest.raises(buildcache.BuildError, match="expected"):
        buildcache.cached_load_inline(name="cudal1_test_verbose_fail", cpp_sources=cpp, verbose=True,
                                      no_implicit_headers=True)
    failed = {d for d in os.listdir(root) if os.path.exists(os.path.join(root, d, "failed"))}
    assert len(failed - before) == 1, os.listdir(root)


def test_a_killed_build_is_not_a_verdict():
    assert buildcache.is_verdict("main.cpp:3:5: error: 'f' was not declared in this scope")
    assert not buildcache.is_verdict("nvcc error   : 'cicc' died due to signal 9 (Kill signal)")
    assert not buildcache.is_verdict("c++: fatal error: Killed signal terminated program cc1plus")
    assert not buildcache.is_verdict(
        "main.cpp:2:10: fatal error: /b/pch/9f89f44f2b52e298/torch/extension.h: No such file or directory")
    assert not buildcache.is_verdict("main.cpp:1:10: error: one or more PCH files were found, but they were invalid")


def test_a_compiler_error_is_a_verdict_with_our_pch_on_the_command_line():
    """The log names our precompiled header's folder (the echoed command's -I, a macro's "In file included from"
    chain through our prelude): the error is still final (CUDA-L1 A100 level1/84's log, reproduced on a CPU
    machine; the old pattern took it for a stale header, so the timed runner compiled it again)."""
    log = ("Error building extension 'depthwise_conv2d_opt': [1/3] c++ -MMD -MF main.o.d "
           "-DTORCH_EXTENSION_NAME=depthwise_conv2d_opt_765abfa5b057 -I/b/pch/dd58435deb27f2aa -isystem /t/include "
           "-fPIC -std=c++17 -c /b/765abfa5b0575d383341a7ec5b1ccab2/main.cpp -o main.o\nFAILED: main.o\n"
           "In file included from /t/include/pybind11/pybind11.h:12,\n"
           "                 from /b/pch/dd58435deb27f2aa/cudal1_light.h:2:\n"
           "main.cpp:28:1: error: redefinition of 'PyObject* PyInit_depthwise_conv2d_opt_765abfa5b057()'\n"
           "ninja: build stopped: subcommand failed.")
    assert buildcache.is_verdict(log)


def test_which_build_errors_a_fuller_prelude_could_fix():
    """buildcache.needs_more_headers on the compiler lines the H200 demo's broken RL samples and the CUDA-L1 release
    produced: only an undeclared name or a missing member/header of the failing unit earns a second compile."""
    ninja_main = ("[1/3] c++ -MMD -c main.cpp -o main.o\nFAILED: main.o\n"
                  "main.cpp:8:69: error: invalid conversion from ‘int64_t’ {aka ‘long int’} to ‘float*’ "
                   "[-fpermissive]\n"
                  "[2/3] nvcc -c cuda.cu -o cuda.cuda.o\n")
    assert not buildcache.needs_more_headers(ninja_main, "cuda.cu")    # cuda.cu is only named, it did not fail
    assert not buildcache.needs_more_headers(ninja_main, "main.cpp")   # a type error: no header fixes it
    dup = "FAILED: cuda.cuda.o\n/b/k/cuda.cu(7): error: duplicate parameter name\n"
    assert not buildcache.needs_more_headers(dup, "cuda.cu")
    own = "main.cpp:4:56: error: ‘matrix_scalar_mul’ was not declared in this scope\n"
    assert not buildcache.needs_more_headers(own, "main.cpp", {"matrix_scalar_mul": ""})
    assert buildcache.needs_more_headers(own, "main.cpp", {"other": ""})
    for cuda_in_cpp in ("main.cpp:35:29: error: ‘threadIdx’ was not declared in this scope",    # level1/95
                        "main.cpp:6:28: error: ‘__global__’ does not name a type"):             # level2/93
        assert not buildcache.needs_more_headers(cuda_in_cpp, "main.cpp")
    assert buildcache.needs_more_headers('/b/k/cuda.cu(12): error: namespace "std" has no member "vector"', "cuda.cu")
    assert buildcache.needs_more_headers('cuda.cu(3): error: identifier "AT_CUDA_CHECK" is undefined', "cuda.cu")
    assert buildcache.needs_more_headers("main.cpp:3:20: error: ‘nn’ is not a member of ‘torch’", "main.cpp")


def _count_loads(monkeypatch, tmp_path):
    monkeypatch.setenv("CUDAL1_BUILD_ROOT", str(tmp_path))
    monkeypatch.setenv("CUDAL1_PCH", "0")     # no precompiled header: one failed compile is all these need
    calls, load = [], buildcache.cpp_extension.load

    def counting(*a, **k):
        calls.append(k.get("sources"))
        return load(*a, **k)
    monkeypatch.setattr(buildcache.cpp_extension, "load", counting)
    return calls


_CUDA_OK = "__global__ void k(float* x) { x[0] = 1.0f; }\nvoid launch(float* x) { k<<<1, 1>>>(x); }\n"


@pytest.mark.parametrize("cpp,cuda,err", [
    # main.cpp's own type error, cuda.cu fine: ninja's log names cuda.cuda.o; the old rule recompiled cuda.cu
    # with torch/types.h for that alone
    ("void launch(float* x);\ntorch::Tensor f(torch::Tensor x) { launch(x.numel()); return x; }", _CUDA_OK,
     "invalid conversion"),
    ("void launch(float* x);\ntorch::Tensor f(torch::Tensor x) { return x; }",            # cuda.cu's syntax error
     "__global__ void k(float* x, float* x) { x[0] = 1.0f; }\nvoid launch(float* x) { k<<<1, 1>>>(x, x); }\n",
     "duplicate parameter name")], ids=["main_cpp_type_error", "cuda_syntax_error"])
def test_a_broken_cuda_build_is_compiled_once(tmp_path, monkeypatch, cpp, cuda, err):
    """The broken RL samples of the H200 demo: a compiler's verdict on the candidate's own code is not retried
    with a fuller prelude (10-50 s of nvcc each); a CPU build of torch is enough to see either unit fail."""
    import shutil
    nvcc = shutil.which("nvcc")
    if not nvcc:
        pytest.skip("needs nvcc")
    monkeypatch.setattr(buildcache.cpp_extension, "CUDA_HOME", buildcache.cpp_extension.CUDA_HOME or
                        os.path.dirname(os.path.dirname(os.path.realpath(nvcc))))
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")
    calls = _count_loads(monkeypatch, tmp_path)
    with pytest.raises(buildcache.BuildError, match=err):
        buildcache.cached_load_inline(name="cudal1_test_cuda_once", cpp_sources=cpp, cuda_sources=cuda,
                                      functions=["f"])
    assert len(calls) == 1, calls


def test_prebuilt_pch_is_the_one_a_candidate_build_uses(tmp_path, monkeypatch):
    """bench.evaluate_many makes main.cpp's precompiled header in the parent before the batch's builds
    (buildcache.prebuild_pch); it must be the very header (same signature, same folder) that a candidate with CUDA
    sources and no flags then finds, and making it must not touch the GPU (no CUDA context in bench's parent: torch
    asks the GPU for an arch unless an arch flag is given). gcc is replaced by a recorder (a real header costs
    ~40 s)."""
    import subprocess
    import torch
    monkeypatch.setattr(buildcache.cpp_extension, "CUDA_HOME", buildcache.cpp_extension.CUDA_HOME or
                        str(tmp_path / "cuda"))                   # only written into the flags here
    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)
    monkeypatch.delenv("CUDAL1_PCH", raising=False)

    def no_gpu(*a, **k):
        raise AssertionError("the GPU was asked")
    for f in ("get_device_capability", "device_count", "init", "_lazy_init", "get_arch_list"):
        monkeypatch.setattr(torch.cuda, f, no_gpu)
    made, real_run = [], subprocess.run

    def fake_gcc(cmd, *a, **kw):                                   # the header's compile only (torch's compiler
        if "c++-header" not in cmd:                                # check runs the real one)
            return real_run(cmd, *a, **kw)
        out = cmd[cmd.index("-o") + 1]
        made.append(out)
        open(out, "w").close()
        return subprocess.CompletedProcess(cmd, 0, b"", b"")
    monkeypatch.setattr(subprocess, "run", fake_gcc)
    d = buildcache.prebuild_pch(str(tmp_path), with_cuda=True)
    assert d and len(made) == 3 and os.path.exists(os.path.join(d, "cudal1_light.h.gch")), (d, made)
    assert sorted(os.path.basename(m) for m in made) == ["cudal1_a.h.gch.tmp", "cudal1_b.h.gch.tmp",
                                                         "cudal1_light.h.gch.tmp"], made   # the split build's two too
    # a candidate's main.cpp, as cached_load_inline asks for it: with_cuda from its CUDA sources, no flags
    args = buildcache.inline_args("cand", "torch::Tensor f(torch::Tensor x) { return x; }",
                                  "__global__ void k() {}", ["f"])
    assert buildcache._pch_dir(str(tmp_path), args, light=True) == d and len(made) == 3, made
    assert all(os.path.exists(os.path.join(buildcache._pch_dir(str(tmp_path), args, light=k), f"cudal1_{k}.h.gch"))
               for k in "ab") and len(made) == 3, made
    # a candidate with its own flags gets a header of its own (another signature): the prebuilt one is not forced on it
    assert buildcache._pch_dir(str(tmp_path), dict(args, cflags=["-O3"]), light=True) != d


def test_which_batches_prebuild_the_pch(monkeypatch):
    """evaluate_many makes the header ahead only for GPU batches with something to build, and CUDAL1_PCH=0 stops it."""
    monkeypatch.delenv("CUDAL1_PCH", raising=False)
    ext, plain = "from torch.utils.cpp_extension import load_inline\n", "import torch\n"
    assert batch.prebuild_wanted("cuda", [plain, ext])
    assert not batch.prebuild_wanted("cuda", [plain, plain])
    assert not batch.prebuild_wanted("cpu", [ext])
    monkeypatch.setenv("CUDAL1_PCH", "0")
    assert not batch.prebuild_wanted("cuda", [ext])


def test_a_batch_that_fills_the_build_cores_is_not_split(monkeypatch, tmp_path):
    """batch.split_builds: a build is split (three compilers) only while SPLIT_UNITS x the builds fit
    the build workers; a crowded batch's build runners get CUDAL1_SPLIT=0 and its prebuilt headers leave the split
    build's two out; a set CUDAL1_SPLIT wins."""
    monkeypatch.delenv("CUDAL1_SPLIT", raising=False)
    assert batch.SPLIT_UNITS == 3
    assert [batch.split_builds(n, 14) for n in (1, 4, 5, 64)] == [True, True, False, False]
    assert [batch.split_builds(n, 3) for n in (1, 2)] == [True, False]
    monkeypatch.setenv("CUDAL1_SPLIT", "1")
    assert batch.split_builds(64, 14)
    monkeypatch.delenv("CUDAL1_SPLIT")
    envs = []                                               # what each build runner would be given
    monkeypatch.setattr(bench, "_evaluate", lambda name, t, c, o, **k: envs.append(o.extra_env) or
                        dict(status="compile_error", error="x", error_type="BuildError", compile_s=1.0))
    monkeypatch.setattr(batch, "prebuild_wanted", lambda *a: True)
    pre = []
    monkeypatch.setattr(batch, "prebuild_pch", lambda root, cpus, split=True: pre.append(split))
    cands = [f"from torch.utils.cpp_extension import load_inline\nX = {k}\n" for k in range(6)]
    for n, want in ((1, None), (6, {"CUDAL1_SPLIT": "0"})):
        envs.clear(), pre.clear()
        rs = bench.evaluate_many([(f"t{k}", "", c) for k, c in enumerate(cands[:n])], device="cpu",
                                 build_root=str(tmp_path), build_workers=14, static_checks=False)
        assert [r["status"] for r in rs] == ["compile_error"] * n
        assert envs == [want] * n and pre and set(pre) == {want is None}, (n, envs, pre)  # (made once, asked twice)


def test_split_declarations_read_plain_functions_only():
    """The split build's glue.cpp declares load_inline's functions as cpp_sources spells them;
    what cannot be read plainly is not split (None): the one-file build takes it."""
    cpp = ("// f(int) in a comment is not a declaration\n#include <vector>\n"
           "void launch(const float* x, float* y, long long n);\n"
           "torch::Tensor f(torch::Tensor x) {\n  return x.relu();\n}\n"
           "std::vector<at::Tensor> g(const torch::Tensor& a, int64_t k = 3) { return {a, f(a)}; }\n")
    assert buildcache.split_declarations(cpp, ["f", "g"]) == [
        "torch::Tensor f(torch::Tensor x);", "std::vector<at::Tensor> g(const torch::Tensor& a, int64_t k = 3);"]
    for bad in ("static torch::Tensor f(torch::Tensor x) { return x; }",            # internal linkage
                "namespace n { torch::Tensor f(torch::Tensor x) { return x; } }\nusing n::f;",
                "template <typename T> T f(T x) { return x; }",
                "torch::Tensor g(torch::Tensor x) { return x; }",                  # f never declared
                "#define F f\ntorch::Tensor F(torch::Tensor x) { return x; }"):
        assert buildcache.split_declarations(bad, ["f"]) is None, bad


def test_split_build_works(tmp_path, monkeypatch):
    """A plain cpp_sources builds as two units side by side (main.cpp, glue.cpp) and works. Without
    precompiled headers: the split build's two cost ~35 s of a 2-core box, against ~12 s for this whole build."""
    monkeypatch.setenv("CUDAL1_BUILD_ROOT", str(tmp_path))
    monkeypatch.setenv("CUDAL1_SPLIT", "1")              # (by default only builds with CUDA sources are split)
    monkeypatch.setenv("CUDAL1_PCH", "0")
    k = time.time_ns()
    m = buildcache.cached_load_inline(name="cudal1_test_split", functions=[f"twice_{k}"],
                                      cpp_sources=f"torch::Tensor twice_{k}(torch::Tensor x) {{ return x * 2; }}")
    import torch
    assert getattr(m, f"twice_{k}")(torch.ones(2)).tolist() == [2.0, 2.0]
    d = os.path.dirname(m.__file__)
    assert os.path.exists(os.path.join(d, "glue.o")) and "cudal1_a.h" in open(os.path.join(d, "main.cpp")).read()
    assert f"twice_{k}(torch::Tensor x);" in open(os.path.join(d, "glue.cpp")).read()


@pytest.mark.parametrize("error, fallback", [
    ("FAILED: glue.o\n/b/k/glue.cpp:2:20: error: 'P' was not declared in this scope", True),   # a type of its own
    ("FAILED: cudal1_x.so\nglue.o: undefined reference to `first(P)'", True),                  # the link
    ("ImportError: cudal1_x.so: undefined symbol: _Z5first1P", True),                          # the import
    ("FAILED: main.o\n/b/k/main.cpp:3:27: error: 'ones' is not a member of 'torch'", True),   # a missing declaration
    ("FAILED: main.o\n/b/k/main.cpp:3:5: error: expected ';' before '}' token", False)])      # the candidate's own
def test_split_build_falls_back_to_one_file(tmp_path, monkeypatch, error, fallback):
    """A split build that fails outside main.cpp and cuda.cu (glue.cpp, the link, the import) or whose main.cpp lacks
    a declaration is built again as one main.cpp, as load_inline would; a plain error of main.cpp is the verdict at
    once (one compile). The compiler is replaced by a recorder failing its first build with `error`."""
    monkeypatch.setenv("CUDAL1_SPLIT", "1")
    monkeypatch.setenv("CUDAL1_PCH", "0")
    calls = []

    def fake_load(name, sources, **kw):
        calls.append(([os.path.basename(x) for x in sources], open(sources[0]).read()))
        if len(calls) == 1:
            raise RuntimeError(f"Error building extension '{name}': {error}")
        return type(sys)(name)
    monkeypatch.setattr(buildcache.cpp_extension, "load", fake_load)
    cpp = "struct P { int a; };\nint first(P p) { return p.a; }\nint one() { return first(P{1}); }"
    args = buildcache.inline_args("cudal1_x", cpp, None, ["first", "one"])
    d = tmp_path / "k"
    d.mkdir()
    if not fallback:
        with pytest.raises(RuntimeError, match="expected ';'"):
            buildcache._compile_extension(args, str(d), "cudal1_x", False, str(tmp_path))
        assert len(calls) == 1, calls
        return
    buildcache._compile_extension(args, str(d), "cudal1_x", False, str(tmp_path))
    assert [c[0] for c in calls] == [["main.cpp", "glue.cpp"], ["main.cpp"]], calls
    assert "cudal1_a.h" in calls[0][1] and "PYBIND11_MODULE" not in calls[0][1]
    assert "cudal1_light.h" in calls[1][1] and "PYBIND11_MODULE" in calls[1][1], calls[1][1]   # the one-file build
