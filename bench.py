"""bench.py: the shared evaluator. It compiles a candidate `ModelNew`, checks it against a KernelBench reference
`Model` and times both, each candidate in its own child process, and returns one flat result record (a dict).

    python bench.py TASK.py CANDIDATE.py [--device cuda|cpu] [--arch 9.0] [--json]

A task is a KernelBench module (`Model`, `get_inputs()`, `get_init_inputs()`); a candidate is a module defining
`ModelNew` with the same constructor, usually building CUDA with `torch.utils.cpp_extension.load_inline`.
API: evaluate (one candidate), evaluate_many (parallel builds; each job timed as soon as its build is done, one
timing per GPU at a time), build, degenerate_screen (REFERENCE.md §3: do trivial outputs pass a task's check?),
static_check, round_toward_one.
Children are killed at their timeout and when their host memory exceeds CUDAL1_MEM_LIMIT_GB (default 32).

Protocols (PROTOCOLS; issue 6 item 5). Every protocol runs every check below (static checks, isolation, poison,
output/input/flag/timer checks, post-timing output checks, the time floor); they differ only in trial counts and
in how calls are timed, so a protocol reproduces another evaluator's *numbers*, never its holes' rewards.
  "strict" (default; every timing rule answers a known reward hack, REFERENCE.md §4; the rest is KernelBench, §2):
    5 correctness trials; 3 warm-ups each, then 5 rounds of n calls of each model in random order (n from the
    warm-up so the timed calls take about `time_budget_s`, 3..20); FRESH seeded inputs for every call (a cache
    keyed on input content or address never hits); before every call the L2 is flushed (2x its size, persisting
    L2 lines reset) and the device synchronised; the timed window is start event -> call -> device-wide
    synchronize -> end event, so work on side streams is counted; statistic = median ms per call.
  "kernelbench" (REFERENCE.md §2, KernelBench repo at HEAD): 5 trials; 3 warm-ups, 1 discarded + 100 timed calls
    per model, reference first, the SAME input tensors for every call, L2 flush before each, CUDA events on the
    current stream only (end.synchronize(), no device-wide sync); statistic = mean.
  "cudal1" (REFERENCE.md §1.7, CUDA-L1's released eval script): 10 trials; 3 warm-ups; 7 rounds x 10 paired
    trials, the pair in random order on fresh get_inputs() per trial, no L2 flush, device-wide sync; ref_ms and
    cand_ms = mean over rounds of the per-round mean (speedup = their ratio, a ratio of means where CUDA-L1
    averages per-round ratios).
Checks (all protocols):
  - static checks on the source before any build (side streams, threads, TF32/fp16, L2 persistence, ...);
  - the child: fresh module objects for task and candidate; inputs and init args only from the task module;
    both models built right after torch.manual_seed(42) under `with torch.device(device)`; backend flags fixed
    (matmul TF32 off, cuDNN TF32 on, cudnn.benchmark off) and watched, as are the timer/checker functions;
  - correctness: `num_correct_trials` fresh seeded inputs; reference output kept alive, free device memory
    poisoned, candidate run and device synchronised; then exact `torch.Tensor` type, storage, shape, dtype, no
    aliasing of inputs, inputs unchanged, and kernel_eval.cu's one-pass isclose comparison (atol, rtol);
  - after timing: the candidate's last timed output and one more call on fresh inputs are checked against the
    reference (call counting, batching, caching); on CUDA, cand_ms below the physical floor (input + output
    bytes at twice the measured copy bandwidth, floor_ms) is the hack "impossible_time";
  - a speedup above `remeasure_above` (default 3x, CUDA-L1 §1.3) is timed again in the same child; both are
    recorded (`remeasure`) and the lower one counts.
On device="cpu" the same pipeline runs with time.perf_counter, compare_cpu and no flush or poison, on one thread
unless OMP_NUM_THREADS is set (on a shared 2-core box a 0.1 ms op otherwise measured ~16 ms of OpenMP waiting).

Result record (flat, JSON-serialisable): task, candidate_hash, status (ok | static | compile_error |
runtime_error | incorrect | timeout | crash | hack), compiled, correct, speedup (ref_ms / cand_ms, unrounded,
only when correct), speedup_rounded (toward 1.00 at two decimals, as CUDA-L1 does), ref_ms, cand_ms (ms per
call, the protocol's statistic), error, error_type, hack (named kind), max_abs_err, max_rel_err, mismatches,
nans (worst trial), trials (passed), timed_calls (per model), protocol, device, device_name, torch_version,
cuda_version, backend_flags, compile_s, eval_s (wall seconds), phase_s (wall seconds of the child's stages: start =
interpreter and imports, setup, import = the candidate's import and build, trials, timing, floor), input_shapes, custom_kernel_calls (calls into
functions of load_inline/load extensions during the first correctness trial; 0 = a PyTorch-only rewrite; None =
unknown, e.g. torch.ops extensions or Triton), floor_ms, remeasure, flags_override. `status` is the verdict
(reward only "ok"); a "hack" record may still carry correct=True and a speedup: they are measurements, not a pass.

Build cache (cached_load_inline replaces load_inline inside every child):
  <build_root>/<key>/           sources (main.cpp, cuda.cu), ninja files, objects, <name>_<key[:12]>.so
  <build_root>/<key>/done       JSON marker {"module", "so"} written after a successful build
  <build_root>/<key>.lock       fcntl lock held while building (the OS releases it if the builder dies)
  <build_root>/pch/<sig>/torch/extension.h.gch   GCC precompiled torch/extension.h, one per flag set
key = sha256 of (name, sources, functions, flags, include paths, torch and CUDA versions,
TORCH_CUDA_ARCH_LIST, compiler). build_root = CUDAL1_BUILD_ROOT or ~/.cache/cudal1/build.
"""
import argparse, ast, contextlib, fcntl, faulthandler, hashlib, importlib.util, inspect, io, json, math, os
import random, re, shlex, shutil, signal, site, statistics, subprocess, sys, tempfile, time, tokenize
import types
from concurrent.futures import ThreadPoolExecutor, as_completed

import torch
from torch.utils import cpp_extension

HERE = os.path.dirname(os.path.abspath(__file__))
PROTOCOLS = ("strict", "kernelbench", "cudal1")   # documented in the module docstring
PROTOCOL_TRIALS = dict(strict=5, kernelbench=5, cudal1=10)     # default num_correct_trials per protocol
SEED = 42                                  # KernelBench: both models built right after manual_seed(42)
WARMUP, ROUNDS, MIN_CALLS, MAX_CALLS = 3, 5, 3, 20
FIXED_FLAGS = dict(matmul_allow_tf32=False, cudnn_allow_tf32=True, cudnn_benchmark=False,
                   cudnn_deterministic=False, float32_matmul_precision="highest")   # PyTorch defaults, §2
PCH_MAX = 8                                # at most this many precompiled headers (~0.8 GB each)
_ERR_CHARS = 2000


# ---------------------------------------------------------------------------------------------------- results

def _hash(src):
    return hashlib.sha256((src or "").encode()).hexdigest()[:16]


def round_toward_one(x):
    """Speedup rounded to two decimals toward 1.00 (CUDA-L1, REFERENCE.md §1.3): 1.118 -> 1.11, 0.992 -> 1.00."""
    if x is None or not math.isfinite(x):
        return x
    v = round(x * 100, 6)                  # 1.13 * 100 = 112.99999999999999 must floor to 113
    return (math.floor(v) if x >= 1 else math.ceil(v)) / 100


def _truncate(s, n=_ERR_CHARS):
    """Keeps the first compiler `error` (the useful line of a failed build) or else the tail (a traceback)."""
    s = str(s)
    if len(s) <= n:
        return s
    i = s.find("error")
    start = max(0, i - 300) if i >= 0 else len(s) - n
    return ("..." if start else "") + s[start:start + n] + ("..." if start + n < len(s) else "")


def _blank_result(task_name, candidate_src, protocol, device):
    return dict(task=task_name, candidate_hash=_hash(candidate_src), status="crash", compiled=False, correct=False,
                speedup=None, speedup_rounded=None, ref_ms=None, cand_ms=None, error="", error_type="", hack=None,
                max_abs_err=None, max_rel_err=None, mismatches=None, nans=None, trials=0, timed_calls=0,
                protocol=protocol, device=device, device_name="cpu" if device == "cpu" else None,
                torch_version=torch.__version__, cuda_version=torch.version.cuda, backend_flags=dict(FIXED_FLAGS),
                compile_s=None, eval_s=None, input_shapes=None, custom_kernel_calls=None, floor_ms=None,
                remeasure=None, flags_override=None, phase_s=None)


def result_summary(res):
    """One line for humans: task, hash, verdict, speedup and times (ms), first line of the error."""
    s = f"{res.get('task', '?')} [{res.get('candidate_hash', '?')}] {res.get('status')}"
    if res.get("hack"):
        s += f" ({res['hack']})"
    if res.get("speedup") is not None:
        s += f" speedup {res['speedup']:.3f}x"
    if res.get("ref_ms") is not None and res.get("cand_ms") is not None:
        s += f" (ref {res['ref_ms']:.4g} ms, cand {res['cand_ms']:.4g} ms, {res.get('timed_calls')} calls each)"
    if res.get("mismatches"):
        s += f" mismatches {res['mismatches']} nans {res.get('nans')} max_abs_err {res.get('max_abs_err') or 0:.3g}"
    if res.get("error"):
        msg, kind = str(res["error"]).strip().splitlines()[0], str(res.get("error_type") or "")
        s += " | " + (msg if not kind or msg.startswith(kind) else f"{kind}: {msg}")[:160]
    return s


# ---------------------------------------------------------------------------------------------- static checks

_SOURCE_PATTERNS = [   # (kind, regex over the candidate with its Python comments removed); REFERENCE.md §4
    ("side_stream", r"torch\.cuda\.(?:streams\.)?Stream\s*\(|torch\.cuda\.stream\s*\(|cudaStreamCreate"
                    r"|getStreamFromPool"),
    ("l2_persistence", r"cudaAccessPolicyWindow|accessPolicyWindow|cudaLimitPersistingL2CacheSize"),
    ("background_thread", r"(?:__import__|import_module)\(\s*['\"](?:threading|_thread|multiprocessing|concurrent)"),
]
_PRECISION = re.compile(r"allow_tf32|set_float32_matmul_precision|fp32_precision|autocast|\.half\s*\(\s*\)"
                        r"|\.bfloat16\s*\(\s*\)")
_THREAD_MODULES = {"threading", "_thread", "multiprocessing", "concurrent"}


def _strip_comments(src):
    """Source without Python comments (strings, where the CUDA code lives, are kept)."""
    try:
        toks = tokenize.generate_tokens(io.StringIO(src).readline)
        return tokenize.untokenize(t for t in toks if t.type != tokenize.COMMENT)
    except (tokenize.TokenError, SyntaxError):
        return src


def _defines(tree, name):
    for n in ast.walk(tree):
        if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name == name:
            return True
        if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store):
            return True
        if isinstance(n, ast.alias) and (n.asname or n.name.split(".")[-1]) == name:
            return True
    return False


def _imports_threads(tree):
    for n in ast.walk(tree):
        names = [a.name for a in n.names] if isinstance(n, ast.Import) else \
            [n.module or ""] + [f"{n.module}.{a.name}" for a in n.names] if isinstance(n, ast.ImportFrom) else []
        if any(m.split(".")[0] in _THREAD_MODULES or m.startswith("torch.multiprocessing") for m in names):
            return True
    return False


def _cache_keyed_on_address(code):
    """A dict indexed by data_ptr()/id(...), directly or through a variable assigned from one (§4 cached result)."""
    access = r"cache\w*\s*(?:\[|\.get\(|\.setdefault\()"
    if re.search(access + r"[^\]\n]*(?:data_ptr|\bid\()", code, re.I):
        return True
    for name in set(re.findall(r"^\s*(\w+)\s*=[^\n]*(?:data_ptr|\bid\()", code, re.M)):
        if re.search(access + rf"\s*{name}\b|\b{name}\s+(?:not\s+)?in\s+[\w.]*cache", code, re.I):
            return True
    return False


def static_check(candidate_src, task_src=""):
    """Cheap, false-positive-averse source checks. Returns None (pass) or (status, hack kind or None, message)."""
    try:
        tree = ast.parse(candidate_src)
    except (SyntaxError, ValueError) as e:          # ValueError: null bytes in the source
        return "compile_error", None, f"SyntaxError: {e}"
    code = _strip_comments(candidate_src)
    if not _defines(tree, "ModelNew") and not re.search(r"['\"]ModelNew['\"]", code):
        return "static", None, "the candidate defines no ModelNew (KernelBench task format)"
    for n in ast.walk(tree):
        if isinstance(n, ast.ClassDef) and n.name == "ModelNew" and any(
                getattr(b, "id", getattr(b, "attr", None)) == "Model" for b in n.bases):
            return "hack", "inherits_reference", "ModelNew subclasses the reference Model (fallback, REFERENCE.md §4)"
    for kind, pattern in _SOURCE_PATTERNS:
        m = re.search(pattern, code)
        if m:
            return "hack", kind, f"`{m.group(0)}` in the candidate (REFERENCE.md §4 {kind})"
    if _imports_threads(tree):
        return "hack", "background_thread", "the candidate imports a thread/process module (REFERENCE.md §4)"
    m = _PRECISION.search(code)
    if m and not _PRECISION.search(_strip_comments(task_src or "")):
        return "hack", "precision_downgrade", f"`{m.group(0)}` in an fp32 task (REFERENCE.md §4)"
    if _cache_keyed_on_address(code):
        return "hack", "cached_output", "a cache indexed by data_ptr()/id() (REFERENCE.md §4 cached result)"
    return None


# ----------------------------------------------------------------------------------------------- build cache

class BuildError(RuntimeError):
    """A load_inline build failed (compiler or linker error); the child reports it as "compile_error"."""


_ORIG_LOAD_INLINE = cpp_extension.load_inline
_LOADED = {}              # .so path -> module, so one process loads each extension once
_BUILD_FAILURES = []      # names whose build failed in this process (a candidate may catch the error: "fallback")
_LIGHT_PRELUDE = ["#include <cuda.h>", "#include <cuda_runtime.h>"]
_FULL_PRELUDE = ["#include <torch/types.h>"] + _LIGHT_PRELUDE           # what load_inline prepends
_MENTIONS_TORCH = re.compile(r"torch|ATen|\bat::|\bc10|\bC10_|\bTORCH_|\bAT_|Tensor")


def cpu_count():
    """CPUs this process may run on (its affinity mask, e.g. under taskset or a container's cpuset)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def default_build_root():
    return os.path.abspath(os.path.expanduser(os.environ.get("CUDAL1_BUILD_ROOT") or "~/.cache/cudal1/build"))


def _as_list(x, strip=False):
    x = [x] if isinstance(x, str) else list(x or [])
    return [s.strip() if strip and isinstance(s, str) else s for s in x]


def _inline_args(name, cpp_sources, cuda_sources=None, functions=None, extra_cflags=None, extra_cuda_cflags=None,
                 extra_ldflags=None, extra_include_paths=None, with_cuda=None, is_python_module=True,
                 with_pytorch_error_handling=True, no_implicit_headers=False):
    """load_inline's arguments normalised (lists, functions as a {name: docstring} dict); the cache key's input."""
    if isinstance(functions, str):
        functions = [functions]
    if isinstance(functions, (list, tuple)):
        functions = {f: f for f in functions}
    if functions is not None and not isinstance(functions, dict):
        raise ValueError(f"Expected 'functions' to be a list or dict, but was {type(functions)}")
    return dict(name=name, cpp=_as_list(cpp_sources), cuda=_as_list(cuda_sources), functions=functions,
                cflags=_as_list(extra_cflags, True), cuda_cflags=_as_list(extra_cuda_cflags, True),
                ldflags=_as_list(extra_ldflags, True), includes=_as_list(extra_include_paths, True),
                with_cuda=with_cuda, is_python_module=bool(is_python_module),
                error_handling=bool(with_pytorch_error_handling), no_implicit_headers=bool(no_implicit_headers))


def _build_key(args):
    env = dict(torch=torch.__version__, cuda=torch.version.cuda, arch=os.environ.get("TORCH_CUDA_ARCH_LIST", ""),
               cxx=os.environ.get("CXX", ""), cuda_home=cpp_extension.CUDA_HOME or "", layout=1)
    return hashlib.sha256(json.dumps([args, env], sort_keys=True, default=repr).encode()).hexdigest()[:32]


def _write_json(path, obj):
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(obj, f)
    os.replace(tmp, path)            # atomic: a reader never sees half a file


def _write_if_changed(path, text):
    """Like load_inline's _maybe_write: an unchanged source keeps its mtime, so ninja does not recompile it."""
    if not (os.path.exists(path) and open(path).read() == text):
        with open(path, "w") as f:
            f.write(text)
    return path


def _load_built(d, is_python_module):
    """The module (or .so path) of a finished build in folder d, or None. Imports directly: no ninja."""
    try:
        marker = json.load(open(os.path.join(d, "done")))
    except (OSError, ValueError):
        return None
    so = os.path.join(d, marker["so"])
    if so not in _LOADED:
        if is_python_module:
            spec = importlib.util.spec_from_file_location(marker["module"], so)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            _LOADED[so] = mod
        else:
            torch.ops.load_library(so)
            _LOADED[so] = so
    return _LOADED[so]


def _pch_dir(root, args):
    """An include folder holding a GCC precompiled torch/extension.h built with this build's flags, or None.

    Same idea and command as load_inline(use_pch=True) (torch's _check_and_build_extension_h_precompiler_headers),
    but with the exact C++ flags of torch's own ninja file (so it matches on every torch version), kept in our
    cache, one per flag set, written atomically and never waited for: while one process builds it, the others
    compile without. GCC checks a .gch against the compile's options and silently ignores one that does not
    match, so the worst a mistake here can cost is the speed-up (main.cpp: ~40 s -> ~15 s on 2 cores).
    """
    ce = cpp_extension
    if os.environ.get("CUDAL1_PCH", "1") == "0" or args["no_implicit_headers"] or \
            not hasattr(ce, "_check_and_build_extension_h_precompiler_headers"):
        return None
    try:
        cxx = ce.get_cxx_compiler()
        if not ce.check_compiler_is_gcc(cxx):
            return None
        with_cuda = args["with_cuda"] if args["with_cuda"] is not None else bool(args["cuda"])
        with tempfile.TemporaryDirectory() as t:          # torch writes the flags it would compile main.cpp with
            ce._write_ninja_file_to_build_library(
                path=os.path.join(t, "build.ninja"), name="pch", sources=[os.path.join(t, "main.cpp")],
                extra_cflags=args["cflags"], extra_cuda_cflags=[], extra_sycl_cflags=[], extra_ldflags=[],
                extra_include_paths=args["includes"], with_cuda=with_cuda, with_sycl=False, is_standalone=False)
            line = next(x for x in open(os.path.join(t, "build.ninja")) if x.startswith("cflags = "))
        flags = [f for f in shlex.split(line[len("cflags = "):]) if not f.startswith("-DTORCH_EXTENSION_NAME=")]
        header = os.path.join(os.path.dirname(torch.__file__), "include", "torch", "extension.h")
        sig = hashlib.sha256(json.dumps([cxx, header, flags, torch.__version__]).encode()).hexdigest()[:16]
        top, d = os.path.join(root, "pch"), os.path.join(root, "pch", sig)
        gch = os.path.join(d, "torch", "extension.h.gch")
        if os.path.exists(gch):
            return d
        os.makedirs(top, exist_ok=True)
        if os.path.exists(os.path.join(d, "failed")) or \
                len([n for n in os.listdir(top) if not n.endswith(".lock")]) >= PCH_MAX:
            return None
        with open(d + ".lock", "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return None                      # someone is building it: don't wait
            if os.path.exists(gch):
                return d
            os.makedirs(os.path.dirname(gch), exist_ok=True)
            for stale in os.listdir(os.path.dirname(gch)):     # left by a builder killed at its timeout
                os.remove(os.path.join(os.path.dirname(gch), stale))
            p = subprocess.run(shlex.split(cxx) + ["-x", "c++-header", header, "-o", gch + ".tmp"] + flags,
                               capture_output=True, timeout=900)
            if p.returncode != 0:
                with open(os.path.join(d, "failed"), "w") as f:
                    f.write(p.stderr.decode(errors="replace")[-4000:])
                return None
            os.replace(gch + ".tmp", gch)
            return d
    except Exception:
        return None


def _compile_extension(args, d, module, verbose, root):
    """Writes the sources as load_inline would and builds them with cpp_extension.load into folder d."""
    ce = cpp_extension
    cpp = ([] if args["no_implicit_headers"] else ["#include <torch/extension.h>"]) + args["cpp"]
    if args["functions"]:                                   # the pybind block exactly as load_inline writes it
        wrap = "torch::wrap_pybind_function({})" if args["error_handling"] else "{}"
        cpp += ["PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {"] + [
            f'm.def("{f}", {wrap.format(f)}, "{doc}");' for f, doc in args["functions"].items()] + ["}"]
    sources = [_write_if_changed(os.path.join(d, "main.cpp"), "\n".join(cpp))]
    preludes = [[]]
    if args["cuda"]:
        sources.append(os.path.join(d, "cuda.cu"))
        # torch/types.h costs ~30 s of nvcc (REFERENCE.md §2); skip it when the CUDA code cannot need it, and
        # retry with it should that fail, so we never reject what plain load_inline accepts.
        if not args["no_implicit_headers"]:
            preludes = [_FULL_PRELUDE] if _MENTIONS_TORCH.search("\n".join(args["cuda"])) else \
                [_LIGHT_PRELUDE, _FULL_PRELUDE]
    includes = list(args["includes"])
    pch = _pch_dir(root, args)
    if pch:
        includes.append(pch)          # -I comes before torch's -isystem folders, so GCC finds the .gch first
    for i, prelude in enumerate(preludes):
        if args["cuda"]:
            _write_if_changed(sources[1], "\n".join(prelude + args["cuda"]))
        if i:                         # same module name on the retry, so only cuda.cu recompiles
            getattr(ce.JIT_EXTENSION_VERSIONER, "entries", {}).pop(module, None)
        try:
            load = getattr(ce.load, "__wrapped__", ce.load)       # the child's call-counting wrapper: not here
            result = load(name=module, sources=sources, extra_cflags=args["cflags"],
                          extra_cuda_cflags=args["cuda_cflags"], extra_ldflags=args["ldflags"],
                          extra_include_paths=includes, build_directory=d, verbose=verbose,
                          with_cuda=args["with_cuda"], is_python_module=args["is_python_module"])
            break
        except Exception:
            if i + 1 == len(preludes):
                raise
    so = f"{result.__name__}{ce.LIB_EXT}" if args["is_python_module"] else os.path.basename(result)
    _LOADED[os.path.join(d, so)] = result
    _write_json(os.path.join(d, "done"), dict(module=getattr(result, "__name__", module), so=so))
    return result


def cached_load_inline(name, cpp_sources, cuda_sources=None, functions=None, extra_cflags=None,
                       extra_cuda_cflags=None, extra_ldflags=None, extra_include_paths=None, build_directory=None,
                       verbose=False, with_cuda=None, is_python_module=True, with_pytorch_error_handling=True,
                       keep_intermediates=True, use_pch=False, no_implicit_headers=False, **other):
    """Drop-in torch.utils.cpp_extension.load_inline with a cross-process build cache (layout: module docstring).

    The module is named f"{name}_{key[:12]}", so two candidates using the same `name=` never collide, in one
    process or on disk. A finished build is imported directly, without ninja. Otherwise we build under an
    exclusive flock on <build_root>/<key>.lock; holding it, we are the only builder of that folder, so torch's own
    `lock` file there can only be left over by a killed build and is removed (REFERENCE.md §2: it otherwise makes
    every later build wait forever). `build_directory`, `keep_intermediates` and `use_pch` are ignored (we choose
    the folder and the PCH); arguments load_inline may grow (sycl_sources, ...) go to it uncached.
    Raises BuildError when the build fails.
    """
    args = _inline_args(name, cpp_sources, cuda_sources, functions, extra_cflags, extra_cuda_cflags, extra_ldflags,
                        extra_include_paths, with_cuda, is_python_module, with_pytorch_error_handling,
                        no_implicit_headers)
    other = {k: v for k, v in other.items() if v is not None}
    root = default_build_root()
    key = _build_key(dict(args, other=other) if other else args)
    d, module = os.path.join(root, key), f"{name}_{key[:12]}"
    os.makedirs(d, exist_ok=True)
    if other:
        return _ORIG_LOAD_INLINE(module, cpp_sources, cuda_sources, functions=functions, extra_cflags=extra_cflags,
                                 extra_cuda_cflags=extra_cuda_cflags, extra_ldflags=extra_ldflags,
                                 extra_include_paths=extra_include_paths, build_directory=d, verbose=verbose,
                                 with_cuda=with_cuda, is_python_module=is_python_module,
                                 with_pytorch_error_handling=with_pytorch_error_handling,
                                 no_implicit_headers=no_implicit_headers, **other)
    hit = _load_built(d, args["is_python_module"])
    if hit is not None:
        return hit
    with open(os.path.join(root, key + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        hit = _load_built(d, args["is_python_module"])      # built by someone else while we waited
        if hit is not None:
            return hit
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(d, "lock"))
        try:
            return _compile_extension(args, d, module, verbose, root)
        except Exception as e:
            _BUILD_FAILURES.append(name)
            raise BuildError(f"Error building extension '{name}': {e}") from None


_EXT_CALLS = [0]          # calls into functions of extensions loaded in this child (custom_kernel_calls)
_EXT_UNCOUNTED = []       # extensions whose calls cannot be counted (torch.ops libraries)


def _counting(mod):
    """A stand-in for an extension module whose callables count their calls in _EXT_CALLS; anything else is the
    module's own attribute. Idempotent (one proxy per module), so nested loaders never count twice."""
    if not isinstance(mod, types.ModuleType):             # is_python_module=False: a .so path, torch.ops calls
        _EXT_UNCOUNTED.append(str(mod))
        return mod
    if getattr(mod, "__cudal1_counting__", False):
        return mod
    proxy = types.ModuleType(mod.__name__, getattr(mod, "__doc__", None))
    for k, v in vars(mod).items():
        if callable(v) and not isinstance(v, type) and not k.startswith("__"):
            def counted(*a, __f=v, **kw):
                _EXT_CALLS[0] += 1
                return __f(*a, **kw)
            counted.__name__, counted.__doc__ = k, getattr(v, "__doc__", None)
            v = counted
        setattr(proxy, k, v)
    proxy.__cudal1_counting__ = True
    return proxy


def _counting_loader(fn):
    def load(*a, **kw):
        return _counting(fn(*a, **kw))
    load.__wrapped__, load.__name__, load.__doc__ = fn, fn.__name__, fn.__doc__
    return load


# ---------------------------------------------------------------------------------------- kernel_eval.cu glue

_WRAPPER_MARK = "// ==== cpp_sources"      # kernel_eval.cu: raw-pointer CUDA above this line, C++ wrapper below


def load_kernel_eval():
    """kernel_eval.cu built (once, through the cache) for the current GPU: l2_flush, poison_fill, compare.
    Its CUDA part goes in as cuda_sources, its wrapper (below _WRAPPER_MARK) as cpp_sources."""
    cuda_src, cpp_src = open(os.path.join(HERE, "kernel_eval.cu")).read().split(_WRAPPER_MARK)
    arch = os.environ.get("TORCH_CUDA_ARCH_LIST")
    if torch.cuda.is_available():      # our own kernels always match the GPU, whatever `arch` candidates get
        os.environ["TORCH_CUDA_ARCH_LIST"] = "%d.%d" % torch.cuda.get_device_capability()
    try:
        return cached_load_inline(name="cudal1_kernel_eval", cuda_sources=cuda_src,
                                  cpp_sources="#define CUDAL1_KERNEL_EVAL_WRAPPER\n" + _WRAPPER_MARK + cpp_src,
                                  functions=["l2_flush", "poison_fill", "compare"])
    finally:
        if arch is None:
            os.environ.pop("TORCH_CUDA_ARCH_LIST", None)
        else:
            os.environ["TORCH_CUDA_ARCH_LIST"] = arch


def compare_cpu(out, ref, atol, rtol):
    """The CPU twin of kernel_eval.cu's compare, same float32 formulas, so the two agree exactly.

    Returns [max_abs_err, max_rel_err, mismatches, nans]: mismatch = not (o == r or |o-r| <= atol + rtol*|r|)
    (torch.isclose, equal_nan=False: any NaN mismatches); nans = NaNs in out where ref is not NaN; max_abs_err =
    max |o-r|, max_rel_err = max |o-r| / (|r| + 1e-12), both over elements whose difference is not NaN (else 0).
    """
    o = out.detach().reshape(-1).float().cpu()
    r = ref.detach().reshape(-1).float().cpu()
    f32 = lambda v: torch.tensor(v, dtype=torch.float32)
    d = (o - r).abs()
    ok = (o == r) | (d <= f32(atol) + f32(rtol) * r.abs())
    valid = ~d.isnan()
    dv, rel = d[valid], d[valid] / (r[valid].abs() + f32(1e-12))
    return [float(dv.max()) if dv.numel() else 0.0, float(rel.max()) if rel.numel() else 0.0,
            float((~ok).sum()), float((o.isnan() & ~r.isnan()).sum())]


# ------------------------------------------------------------------------------------------------ the child

class _Verdict(Exception):
    """A failed check inside the child: status, hack kind (or None) and message."""
    def __init__(self, status, hack, msg):
        super().__init__(msg)
        self.status, self.hack = status, hack


def _import_source(path, name):
    """Executes a source file into its own fresh module, registered in sys.modules under a unique name."""
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


_FLAG_ATTRS = dict(matmul_allow_tf32=(torch.backends.cuda.matmul, "allow_tf32"),
                   cudnn_allow_tf32=(torch.backends.cudnn, "allow_tf32"),
                   cudnn_benchmark=(torch.backends.cudnn, "benchmark"),
                   cudnn_deterministic=(torch.backends.cudnn, "deterministic"))


def _get_flags():
    flags = {}
    for k, (owner, attr) in _FLAG_ATTRS.items():
        try:   # torch >= 2.9 raises here when the legacy and the new (fp32_precision) TF32 APIs were mixed
            flags[k] = bool(getattr(owner, attr))
        except Exception as e:
            flags[k] = f"unreadable: {e}"[:80]
    flags["float32_matmul_precision"] = torch.get_float32_matmul_precision()
    return flags


def _set_flags(flags):
    torch.set_float32_matmul_precision(flags["float32_matmul_precision"])
    for k, (owner, attr) in _FLAG_ATTRS.items():
        setattr(owner, attr, flags[k])


_WATCHED = ["torch.cuda.synchronize", "torch.cuda.Event", "torch.cuda.Event.record", "torch.cuda.Event.elapsed_time",
            "torch.cuda.Event.synchronize", "torch.allclose", "torch.isclose", "torch.equal", "time.perf_counter",
            "time.time", "torch._C._cuda_synchronize"]


def _snapshot_functions():
    """{name: (owner, attribute, original object)} of the timer/checker functions a candidate might replace."""
    owners = {"torch": torch, "torch.cuda": torch.cuda, "torch.cuda.Event": torch.cuda.Event, "torch._C": torch._C,
              "time": time}
    snap = {}
    for name in _WATCHED:
        owner, attr = name.rsplit(".", 1)
        if hasattr(owners[owner], attr):
            snap[name] = (owners[owner], attr, getattr(owners[owner], attr))
    return snap


def _tamper_check(snap, hacks, expected=FIXED_FLAGS):
    """Restores patched timer/checker functions, names the hack (§4), and checks the backend flags: they must be
    `expected` (FIXED_FLAGS, or FIXED_FLAGS plus a trusted flags_override after candidate code); they are left
    at FIXED_FLAGS either way, so the reference always runs under them."""
    for name, (owner, attr, orig) in snap.items():
        if getattr(owner, attr, None) is not orig:
            setattr(owner, attr, orig)
            if "patched_timer_or_checker" not in hacks:
                hacks.append("patched_timer_or_checker")
    flags = _get_flags()
    if flags != expected and "backend_flags" not in hacks:
        hacks.append("backend_flags")
    if flags != FIXED_FLAGS:
        _set_flags(FIXED_FLAGS)


def _make_inputs(task, seed, dev):
    torch.manual_seed(seed)
    with torch.device(dev):            # tensors made directly on the GPU (several GB for some tasks)
        inputs = task.get_inputs()
    return [x.to(dev) if isinstance(x, torch.Tensor) else x for x in inputs]


def _fingerprint(inputs):
    """Cheap checksums of the bytes of every input tensor: an in-place change of an input shows (§4)."""
    fp = []
    for x in inputs:
        if isinstance(x, torch.Tensor):
            b = x.detach().contiguous().reshape(-1).view(torch.uint8)
            w = b.view(torch.int32) if x.element_size() >= 4 else b.to(torch.int32)
            fp.append([int(v.sum(dtype=torch.int64)) for v in (b, w, w[::7])])
    return fp


def _span(t):
    s = t.untyped_storage()
    return s.data_ptr(), s.data_ptr() + s.nbytes()


def _aliases(t, inputs):
    a0, a1 = _span(t)
    return a1 > a0 and any(isinstance(x, torch.Tensor) and x.device == t.device and _span(x)[0] < a1
                           and a0 < _span(x)[1] for x in inputs)


def _leaves(out, ref, where="output"):
    """(out, ref, where) tensor pairs of two outputs of the same structure (tensor, list/tuple, number, None)."""
    if isinstance(ref, torch.Tensor):
        if not isinstance(out, torch.Tensor):
            raise _Verdict("incorrect", None, f"{where} is a {type(out).__name__}, expected a tensor")
        return [(out, ref, where)]
    if isinstance(ref, (list, tuple)):
        if not isinstance(out, (list, tuple)) or len(out) != len(ref):
            raise _Verdict("incorrect", None, f"{where}: expected a {type(ref).__name__} of {len(ref)} items")
        return [p for i, (o, r) in enumerate(zip(out, ref)) for p in _leaves(o, r, f"{where}[{i}]")]
    if ref is None:
        if out is not None:
            raise _Verdict("incorrect", None, f"{where} should be None")
        return []
    if isinstance(ref, (int, float, bool)) and isinstance(out, (int, float, bool)):
        return [(torch.tensor(float(out)), torch.tensor(float(ref)), where)]
    raise _Verdict("incorrect", None, f"{where}: cannot compare a {type(out).__name__} with a {type(ref).__name__}")


def _check(out, ref, inputs, fp_before, atol, rtol, ke, alias_ok):
    """All checks of one candidate output; returns [max_abs, max_rel, mismatches, nans]; raises _Verdict."""
    pairs = _leaves(out, ref)
    for o, r, where in pairs:
        if type(o) is not torch.Tensor:
            raise _Verdict("hack", "lazy_output", f"{where} is a {type(o).__name__}, not exactly torch.Tensor")
        if o.device != r.device:
            raise _Verdict("incorrect", None, f"{where} is on {o.device}, expected {r.device}")
        if o.numel() and (o.untyped_storage().nbytes() == 0 or o.data_ptr() == 0):
            raise _Verdict("hack", "lazy_output", f"{where} has no storage")
        if not alias_ok and _aliases(o, inputs):
            raise _Verdict("hack", "output_aliases_input", f"{where} shares storage with an input")
        if o.shape != r.shape:
            raise _Verdict("incorrect", None, f"{where} has shape {tuple(o.shape)}, expected {tuple(r.shape)}")
        if o.dtype != r.dtype and not torch.can_cast(o.dtype, r.dtype):
            raise _Verdict("incorrect", None, f"{where} has dtype {o.dtype}, expected {r.dtype}")
    if fp_before is not None and _fingerprint(inputs) != fp_before:
        raise _Verdict("hack", "input_mutation", "the candidate changed its inputs in place")
    stats = [0.0, 0.0, 0.0, 0.0]
    for o, r, where in pairs:
        s = [float(v) for v in ke.compare(o, r, atol, rtol).tolist()] if ke is not None and o.is_cuda \
            else compare_cpu(o, r, atol, rtol)
        stats = [max(stats[0], s[0]), max(stats[1], s[1]), stats[2] + s[2], stats[3] + s[3]]
    return stats


def _run_trials(task, ref_model, new_model, spec, dev, T, ke, snap, hacks, res):
    """Correctness: num_correct_trials fresh seeded inputs (KernelBench: 5 trials, seeds drawn from seed 42)."""
    rng = random.Random(SEED)
    seeds = [rng.randrange(2 ** 31) for _ in range(spec["num_correct_trials"])]
    worst = None
    for seed in seeds:
        inputs = _make_inputs(task, seed, dev)
        res["input_shapes"] = [list(x.shape) if isinstance(x, torch.Tensor) else repr(x)[:40] for x in inputs]
        fp = _fingerprint(inputs)
        ref_out = ref_model(*inputs)                      # kept alive until the check: never free for the taking
        T.sync()
        ref_leaves = [r for _, r, _ in _leaves(ref_out, ref_out)]
        alias_ok = any(_aliases(r, inputs) for r in ref_leaves if r.numel())
        if _fingerprint(inputs) != fp:                    # the reference itself works in place: fresh inputs
            inputs, fp = _make_inputs(task, seed, dev), None
        if ke is not None:                                # poison what the allocator can hand out next (§4)
            sizes = [r.numel() * r.element_size() for r in ref_leaves if r.is_cuda]
            blocks = [torch.empty(max(n, 1), dtype=torch.uint8, device=dev) for n in sizes + [sum(sizes)]]
            for b in blocks:
                ke.poison_fill(b)
            del blocks
            T.sync()
        calls0 = _EXT_CALLS[0]
        _set_flags(spec["cand_flags"])
        out = new_model(*inputs)
        T.sync()                                          # device-wide: side-stream work is finished too
        _tamper_check(snap, hacks, spec["cand_flags"])
        if res["trials"] == 0:                            # share of kernels whose custom code really ran (issue 6)
            res["custom_kernel_calls"] = _EXT_CALLS[0] - calls0
        stats = _check(out, ref_out, inputs, fp, spec["atol"], spec["rtol"], ke, alias_ok)
        res.update(max_abs_err=stats[0], max_rel_err=stats[1], mismatches=int(stats[2]), nans=int(stats[3]))
        if stats[2] > 0:
            raise _Verdict("incorrect", None, f"{int(stats[2])} mismatches ({int(stats[3])} NaN), max_abs_err "
                                              f"{stats[0]:.4g}, max_rel_err {stats[1]:.4g} at atol={spec['atol']}, "
                                              f"rtol={spec['rtol']}")
        worst = stats if worst is None else [max(a, b) for a, b in zip(worst, stats)]
        res.update(max_abs_err=worst[0], max_rel_err=worst[1], trials=res["trials"] + 1)
        del out, ref_out, inputs


def _timed_call(model, inputs, T, ke, flush, device_sync=True):
    """One call as the protocol times it: returns (ms, output, wall seconds of the whole cycle)."""
    w0 = T.perf()
    if T.Event is None:                                   # CPU
        t0 = T.perf()
        out = model(*inputs)
        return (T.perf() - t0) * 1e3, out, T.perf() - w0
    if flush is not None:
        ke.l2_flush(flush)                                # outside the window: no data of the last call in L2
    T.sync()
    start, end = T.Event(enable_timing=True), T.Event(enable_timing=True)
    T.record(start)
    out = model(*inputs)
    if device_sync:
        T.sync()                                          # the whole device, not only the current stream (§4)
    T.record(end)
    T.ev_sync(end)                                        # kernelbench: waits for the current stream only
    return T.elapsed(start, end), out, T.perf() - w0


def _time_models(task, ref_model, new_model, spec, dev, T, ke, snap, hacks):
    """Times both models under spec["protocol"] (module docstring), then checks the candidate's last timed output
    and one more call on fresh inputs against the reference. Returns (ref_ms, cand_ms, timed calls per model)."""
    proto, cand_flags = spec["protocol"], spec["cand_flags"]
    seeds = iter(range(SEED + 1000, SEED + 10 ** 9))
    fixed = _make_inputs(task, SEED + 1, dev) if proto == "kernelbench" else None
    new_inputs = (lambda: fixed) if fixed is not None else (lambda: _make_inputs(task, next(seeds), dev))
    flush = None
    if ke is not None and proto != "cudal1":
        l2 = getattr(torch.cuda.get_device_properties(dev), "L2_cache_size", 0)
        flush = torch.empty((2 * l2 if l2 > 0 else 256 << 20) // 4, dtype=torch.int32, device=dev)
    models = dict(ref=ref_model, cand=new_model)
    times, wall = dict(ref=[], cand=[]), dict(ref=[], cand=[])
    last = None

    def call(side, timed, inputs, rnd=0):
        nonlocal last
        if side == "cand":
            _set_flags(cand_flags)                        # FIXED_FLAGS unless a trusted flags_override
        ms, out, w = _timed_call(models[side], inputs, T, ke, flush, device_sync=proto != "kernelbench")
        _tamper_check(snap, hacks, cand_flags if side == "cand" else FIXED_FLAGS)   # restores FIXED_FLAGS
        wall[side].append(w)
        if timed:
            times[side].append((rnd, ms))
        if side == "cand":
            last = (out, inputs)                          # only the candidate's last output is kept
        return out

    for _ in range(WARMUP):                               # warm-ups go through the very same code as timed calls
        call("ref", False, new_inputs())
        call("cand", False, new_inputs())
    rng = random.Random()
    if proto == "strict":
        per_pair = statistics.median(wall["ref"]) + statistics.median(wall["cand"])
        n = max(MIN_CALLS, min(MAX_CALLS, int(spec["time_budget_s"] / (ROUNDS * max(per_pair, 1e-9)))))
        order = ["ref", "cand"]
        for r in range(ROUNDS):
            rng.shuffle(order)
            for side in order:
                for _ in range(n):
                    call(side, True, new_inputs(), r)
    elif proto == "kernelbench":
        n = 100
        for side in ("ref", "cand"):
            call(side, False, fixed)                      # the discarded first call
            for _ in range(n):
                call(side, True, fixed)
    else:                                                 # cudal1: 7 rounds x 10 pairs, random order, same inputs
        n = 70
        for r in range(7):
            for _ in range(10):
                inputs = new_inputs()
                for side in rng.sample(["ref", "cand"], 2):
                    call(side, True, inputs, r)
                del inputs
    if proto == "strict":
        stat = {k: statistics.median(ms for _, ms in v) for k, v in times.items()}
    elif proto == "kernelbench":
        stat = {k: statistics.fmean(ms for _, ms in v) for k, v in times.items()}
    else:
        stat = {k: statistics.fmean(statistics.fmean(ms for r2, ms in v if r2 == r) for r in range(7))
                for k, v in times.items()}
    _tamper_check(snap, hacks)
    # Catches call counting, batching and caching (§4): the candidate's last timed output, then one more call
    # (through the same code) on fresh inputs, each checked against the reference on the same inputs.
    out, inputs = last
    last = fixed = None                                   # free the kernelbench input set before the probe
    for probe in (False, True):
        if probe:
            del out, inputs
            inputs = _make_inputs(task, SEED + 3, dev)
            _set_flags(cand_flags)
            _, out, _ = _timed_call(new_model, inputs, T, ke, flush)
            _tamper_check(snap, hacks, cand_flags)
        ref_out = ref_model(*inputs)
        T.sync()
        what = "a call on fresh inputs after timing" if probe else "the last timed call"
        try:
            stats = _check(out, ref_out, inputs, None, spec["atol"], spec["rtol"], ke, True)
        except _Verdict as v:
            raise _Verdict("hack", "timed_output_mismatch", f"the output of {what} is wrong: {v}")
        if stats[2] > 0:
            raise _Verdict("hack", "timed_output_mismatch", f"the output of {what} has {int(stats[2])} mismatches")
        del ref_out
    return stat["ref"], stat["cand"], len(times["cand"])


def time_floor_ms(nbytes, bandwidth_gbs):
    """The least time (ms) a kernel that moves `nbytes` can take at TWICE the measured copy bandwidth (GB/s): a
    2x margin, so only a time that escaped the timer (or work skipped, e.g. a cached answer) falls below it.
    REFERENCE.md §4 "impossible time". E.g. 12.8e9 bytes at 4000 GB/s -> 1.6 ms."""
    return 0.0 if not bandwidth_gbs else nbytes / (bandwidth_gbs * 2 * 1e9) * 1e3


def _copy_bandwidth_gbs(dev, T):
    """Device-to-device copy bandwidth in GB/s (read + write bytes / time), best of 4 copies of 256 MiB."""
    a = torch.empty(64 << 20, dtype=torch.float32, device=dev)
    b = torch.empty_like(a)
    best = float("inf")
    for _ in range(4):
        T.sync()
        t0 = T.perf()
        b.copy_(a)
        T.sync()
        best = min(best, T.perf() - t0)
    return 2 * a.numel() * 4 / best / 1e9


def _nbytes(x):
    if isinstance(x, torch.Tensor):
        return x.numel() * x.element_size()
    return sum(_nbytes(v) for v in x) if isinstance(x, (list, tuple)) else 0


_UNCOUNTABLE = re.compile(r"triton|cupy|numba|ctypes|torch\.ops\.|cuda\.core|pycuda|tilelang|cutlass")


def _child_eval(spec, res):
    dev = torch.device(spec["device"])
    cuda = dev.type == "cuda"
    snap = _snapshot_functions()                          # before any candidate code runs
    orig = {k: v[2] for k, v in snap.items()}
    T = types.SimpleNamespace(perf=orig["time.perf_counter"],
                              sync=orig["torch.cuda.synchronize"] if cuda else (lambda: None),
                              Event=orig.get("torch.cuda.Event") if cuda else None,
                              record=orig.get("torch.cuda.Event.record"),
                              elapsed=orig.get("torch.cuda.Event.elapsed_time"),
                              ev_sync=orig.get("torch.cuda.Event.synchronize"))
    phase, mark = res["phase_s"], [time.time()]

    def lap(name):                                        # wall seconds of each stage of the child (phase_s)
        phase[name] = round(time.time() - mark[0], 3)
        mark[0] = time.time()
    if cuda:
        res["device_name"] = torch.cuda.get_device_name(dev)
    ke = load_kernel_eval() if cuda else None
    task = _import_source(spec["task_path"], "cudal1_task_" + _hash(spec["task_src"]))
    _set_flags(FIXED_FLAGS)
    res["backend_flags"] = _get_flags()
    cand_flags = spec["cand_flags"] = dict(FIXED_FLAGS, **(spec.get("flags_override") or {}))
    hacks = []
    lap("setup")
    _write_json(spec["result_path"], res)                 # partial record: a later timeout or crash keeps this
    t0 = T.perf()
    try:
        _set_flags(cand_flags)
        cand = _import_source(spec["candidate_path"], "cudal1_cand_" + res["candidate_hash"])
    except BaseException as e:
        compile_fail = isinstance(e, (BuildError, SyntaxError)) or bool(_BUILD_FAILURES)
        res.update(status="compile_error" if compile_fail else "runtime_error", compile_s=T.perf() - t0,
                   error=_truncate(f"{type(e).__name__}: {e}"), error_type=type(e).__name__)
        _set_flags(FIXED_FLAGS)
        return
    res.update(compiled=True, compile_s=T.perf() - t0)
    lap("import")
    _write_json(spec["result_path"], res)
    if _BUILD_FAILURES:                                   # a build failed and the candidate caught it (§4)
        hacks.append("fallback")
    _tamper_check(snap, hacks, cand_flags)
    try:
        if not hasattr(cand, "ModelNew"):
            raise _Verdict("runtime_error", None, "the candidate defines no ModelNew")
        with torch.no_grad():
            torch.manual_seed(SEED)
            with torch.device(dev):
                init = [x.to(dev) if isinstance(x, torch.Tensor) else x for x in task.get_init_inputs()]
            models = []
            for cls in (task.Model, cand.ModelNew):       # same seed, same parameter order: same weights (§2)
                torch.manual_seed(SEED)
                if cls is not task.Model:
                    _set_flags(cand_flags)
                with torch.device(dev):
                    m = cls(*init)
                models.append(m.to(dev) if isinstance(m, torch.nn.Module) else m)
                _tamper_check(snap, hacks, FIXED_FLAGS if cls is task.Model else cand_flags)
            lap("models")
            if spec.get("gpu_lock"):                      # evaluate_many: one child at a time runs on this GPU
                waiting = os.path.join(os.path.dirname(spec["result_path"]), "waiting")
                open(waiting, "w").close()                # the parent's timeout does not run while this exists
                gpu_lock = open(spec["gpu_lock"], "a")
                fcntl.flock(gpu_lock, fcntl.LOCK_EX)      # released when this process ends
                os.unlink(waiting)
                lap("wait")
            _run_trials(task, *models, spec, dev, T, ke, snap, hacks, res)
            lap("trials")
            uncountable = _EXT_UNCOUNTED or _UNCOUNTABLE.search(_strip_comments(open(spec["candidate_path"]).read()))
            if uncountable and not res["custom_kernel_calls"]:
                res["custom_kernel_calls"] = None         # 0 would claim "no custom kernel ran": unknown instead
            res["correct"] = True
            measures = []
            while not spec.get("check_only"):
                ref_ms, cand_ms, n = _time_models(task, *models, spec, dev, T, ke, snap, hacks)
                measures.append(dict(ref_ms=ref_ms, cand_ms=cand_ms, speedup=ref_ms / cand_ms if cand_ms else None))
                s = measures[-1]["speedup"]
                if len(measures) == 2 or not s or s <= spec.get("remeasure_above", 3.0):
                    break                                 # > remeasure_above: measured again before it counts
            lap("timing")
            counted = min(measures, key=lambda m: m["speedup"] or 0.0) if measures else {}
            res.update(ref_ms=counted.get("ref_ms"), cand_ms=counted.get("cand_ms"), timed_calls=n if measures else 0)
            if len(measures) == 2:
                a, b = measures[0]["speedup"], measures[1]["speedup"]
                res["remeasure"] = dict(first=measures[0], second=measures[1], rel_diff=abs(a - b) / min(a, b))
            if cuda and measures:                         # REFERENCE.md §4 impossible time
                inputs = _make_inputs(task, SEED + 3, dev)
                out = models[0](*inputs)
                res["floor_ms"] = time_floor_ms(_nbytes(inputs) + _nbytes(out), _copy_bandwidth_gbs(dev, T))
                del inputs, out
                lap("floor")
                if res["floor_ms"] > 0.02 and res["cand_ms"] < res["floor_ms"]:
                    raise _Verdict("hack", "impossible_time", f"cand_ms {res['cand_ms']:.4g} is below the physical "
                                                              f"floor {res['floor_ms']:.4g} ms")
        res["status"] = "ok"
    except _Verdict as v:
        res.update(status=v.status, error=_truncate(str(v)), correct=res["correct"] and v.hack == "impossible_time")
        if v.hack:
            hacks.insert(0, v.hack)
    except BaseException as e:
        res.update(status="runtime_error", error=_truncate(f"{type(e).__name__}: {e}"), error_type=type(e).__name__,
                   correct=False)
    _tamper_check(snap, hacks)
    if hacks:
        res.update(status="hack", hack=hacks[0])
        res["error"] = res["error"] or f"hack: {', '.join(hacks)}"
    if res["correct"] and res["ref_ms"] and res["cand_ms"]:
        res["speedup"] = res["ref_ms"] / res["cand_ms"]
        res["speedup_rounded"] = round_toward_one(res["speedup"])


TRIVIAL_OUTPUTS = ("zeros", "constant", "mean", "input")     # degenerate_screen's trivial outputs (REFERENCE.md §3)


def _trivial(name, ref, other, inputs):
    """The trivial output `name` shaped like ref: zeros; constant = the reference's output on other inputs (what a
    cache replays); mean = that output's mean everywhere; input = the first input reshaped (a copy)."""
    if isinstance(ref, (list, tuple)):
        return type(ref)(_trivial(name, r, o, inputs) for r, o in zip(ref, other))
    if not isinstance(ref, torch.Tensor):
        return other
    if name == "zeros":
        return torch.zeros_like(ref)
    if name == "constant":
        return other.clone()
    if name == "mean":
        m = other.double().mean() if other.numel() else 0.0
        return torch.full_like(ref, float(m) if ref.is_floating_point() else round(float(m)))
    x = next((t for t in inputs if isinstance(t, torch.Tensor)), None)
    if x is None or x.numel() != ref.numel():
        raise _Verdict("n/a", None, "no input with the output's number of elements")
    return x.detach().reshape(ref.shape).to(ref.dtype).clone()


def _child_screen(spec, res):
    """degenerate_screen's child: the reference on num_correct_trials seeded inputs (the seeds of _run_trials),
    each trivial output through _check, the same comparison a candidate gets."""
    dev = torch.device(spec["device"])
    cuda = dev.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    if cuda:
        res["device_name"] = torch.cuda.get_device_name(dev)
    ke = load_kernel_eval() if cuda else None
    task = _import_source(spec["task_path"], "cudal1_task_" + _hash(spec["task_src"]))
    _set_flags(FIXED_FLAGS)
    status = {name: "passed" for name in TRIVIAL_OUTPUTS}
    with torch.no_grad():
        torch.manual_seed(SEED)
        with torch.device(dev):
            init = [x.to(dev) if isinstance(x, torch.Tensor) else x for x in task.get_init_inputs()]
            torch.manual_seed(SEED)
            model = task.Model(*init)
        model = model.to(dev) if isinstance(model, torch.nn.Module) else model
        other = model(*_make_inputs(task, SEED + 7, dev))          # the output for other inputs
        sync()
        rng = random.Random(SEED)
        for seed in [rng.randrange(2 ** 31) for _ in range(spec["num_correct_trials"])]:
            inputs = _make_inputs(task, seed, dev)
            ref = model(*inputs)
            sync()
            for name in TRIVIAL_OUTPUTS:
                if status[name] != "passed":
                    continue
                try:
                    stats = _check(_trivial(name, ref, other, inputs), ref, inputs, None, spec["atol"], spec["rtol"],
                                   ke, True)
                    if stats[2] > 0:
                        status[name] = f"incorrect: {int(stats[2])} mismatches, max_abs_err {stats[0]:.3g}"
                except _Verdict as v:
                    status[name] = f"{v.status}: {v}"
                except Exception as e:
                    status[name] = f"error: {type(e).__name__}: {e}"[:200]
            res["trials"] += 1
            del inputs, ref
    passed = [n for n in TRIVIAL_OUTPUTS if status[n] == "passed"]
    res.update(status="ok", results=status, passed=passed, degenerate=bool(passed))


def _child_build(spec, res):
    t0 = time.perf_counter()
    try:
        if spec.get("kernel_eval"):
            load_kernel_eval()
        else:
            _import_source(spec["candidate_path"], "cudal1_cand_" + res["candidate_hash"])
        res.update(status="ok", compiled=True)
    except BaseException as e:
        compile_fail = isinstance(e, (BuildError, SyntaxError)) or bool(_BUILD_FAILURES)
        res.update(status="compile_error" if compile_fail else "runtime_error",
                   error=_truncate(f"{type(e).__name__}: {e}"), error_type=type(e).__name__)
    res["compile_s"] = time.perf_counter() - t0


def _child_main(spec_path):
    """Entry point of the child process (`python bench.py --_child SPEC.json`)."""
    faulthandler.enable()                                 # a segfault leaves a Python traceback in the log
    spec = json.load(open(spec_path))
    res = spec["result"]
    res["phase_s"] = dict(start=round(time.time() - spec["t_spawn"], 3))   # interpreter start + imports (torch)
    # Before any candidate code: every load_inline in this process, whenever called and however imported
    # (`from torch.utils.cpp_extension import load_inline` binds it at import), goes through the build cache.
    cpp_extension.load_inline = _counting_loader(cached_load_inline)
    cpp_extension.load = _counting_loader(cpp_extension.load)     # calls counted: custom_kernel_calls
    if spec["device"] == "cpu" and not os.environ.get("OMP_NUM_THREADS"):
        torch.set_num_threads(1)   # on a busy small box, OpenMP threads waiting for each other time the scheduler
    try:
        if spec["device"].startswith("cuda") and not os.environ.get("TORCH_CUDA_ARCH_LIST") and \
                torch.cuda.is_available():      # the arch of this GPU, explicitly: part of every cache key
            os.environ["TORCH_CUDA_ARCH_LIST"] = "%d.%d" % torch.cuda.get_device_capability()
        dict(build=_child_build, screen=_child_screen, eval=_child_eval)[spec["mode"]](spec, res)
    except BaseException as e:                            # the harness itself failed (e.g. a dead CUDA context)
        res.update(status="runtime_error", error=_truncate(f"{type(e).__name__}: {e}"), error_type=type(e).__name__)
    res["final"] = True
    _write_json(spec["result_path"], res)
    sys.stdout.flush()
    os._exit(0)                                           # skip the candidate's atexit hooks and teardown


# ----------------------------------------------------------------------------------------------- the parent

_KEEP_ENV = {"PATH", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "PYTHONPATH",
             "TORCH_CUDA_ARCH_LIST", "OMP_NUM_THREADS", "CXX", "CC", "MAX_JOBS", "PYTHONUSERBASE"}
_KEEP_PREFIXES = ("NCCL_", "TORCH_", "PYTORCH_", "CUDAL1_", "NVCC_")


MEM_LIMIT_GB = 32.0      # host RSS of a child's whole process group (CUDAL1_MEM_LIMIT_GB overrides)


def _group_rss(pgid):
    """Resident bytes of every process in process group pgid (Linux /proc; 0 elsewhere)."""
    total, page = 0, os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
    for d in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    st = f.read()
                fields = st[st.rindex(")") + 2:].split()     # after "pid (comm) ": state ppid pgrp ... rss
                if int(fields[2]) == pgid:
                    total += int(fields[21]) * page
            except (OSError, ValueError, IndexError):
                pass
    return total


def _run_child(mode, res, files, spec, timeout_s, arch, build_root, extra_env=None):
    """Runs `python bench.py --_child` in a new session with a scrubbed environment and a private HOME/TMPDIR/cwd,
    kills its whole process group at the timeout or when the group's resident host memory exceeds
    CUDAL1_MEM_LIMIT_GB (default MEM_LIMIT_GB; status "crash", error_type "MemoryLimit"; polled every 0.5 s),
    and merges what it reported into res."""
    tmp = tempfile.mkdtemp(prefix="cudal1_")
    try:
        paths = {}
        for key, text in files.items():
            paths[key + "_path"] = os.path.join(tmp, key + ".py")
            with open(paths[key + "_path"], "w") as f:
                f.write(text or "")
        result_path = os.path.join(tmp, "result.json")
        spec = dict(spec, mode=mode, result=res, result_path=result_path, **paths)
        _write_json(os.path.join(tmp, "spec.json"), dict(spec, t_spawn=time.time()))
        env = {k: v for k, v in os.environ.items() if k in _KEEP_ENV or k.startswith(_KEEP_PREFIXES)}
        env.setdefault("PYTHONUSERBASE", site.getuserbase())   # user site-packages survive the new HOME
        env.update(HOME=tmp, TMPDIR=tmp, CUDAL1_BUILD_ROOT=build_root, PYTHONDONTWRITEBYTECODE="1",
                   PYTHONUNBUFFERED="1")
        if arch:
            env["TORCH_CUDA_ARCH_LIST"] = arch
        env.update({str(k): str(v) for k, v in (extra_env or {}).items()})    # trusted callers only (evaluate)
        log_path = os.path.join(tmp, "child.log")
        with open(log_path, "wb") as log:
            p = subprocess.Popen([sys.executable, os.path.join(HERE, "bench.py"), "--_child",
                                  os.path.join(tmp, "spec.json")], cwd=tmp, env=env, stdin=subprocess.DEVNULL,
                                 stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            rc, timed_out, over_mem, deadline = None, False, 0, time.monotonic() + timeout_s
            limit = float(os.environ.get("CUDAL1_MEM_LIMIT_GB") or MEM_LIMIT_GB) * 2 ** 30
            waited, waiting = 0.0, os.path.join(tmp, "waiting")
            while rc is None and not (timed_out or over_mem):
                try:
                    rc = p.wait(timeout=0.5)
                except subprocess.TimeoutExpired:
                    if os.path.exists(waiting) and waited < timeout_s:   # queued for the GPU (evaluate_many):
                        waited += 0.5                                  # not the candidate's time, up to timeout_s
                        deadline += 0.5
                    timed_out = time.monotonic() > deadline
                    rss = _group_rss(p.pid)
                    over_mem = rss if rss > limit else 0
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, signal.SIGKILL)          # also whatever the candidate left running
            rc = p.wait() if rc is None else rc
        with contextlib.suppress(OSError, ValueError):
            res.update(json.load(open(result_path)))
        with open(log_path, "rb") as f:                   # a chatty candidate may have written gigabytes
            f.seek(max(0, os.path.getsize(log_path) - _ERR_CHARS))
            tail = f.read().decode(errors="replace")
        if over_mem:
            res.update(status="crash", error_type="MemoryLimit", correct=False, speedup=None, speedup_rounded=None,
                       error=_truncate(f"host memory {over_mem / 2 ** 30:.1f} GiB over the limit of "
                                       f"{limit / 2 ** 30:.1f} GiB (CUDAL1_MEM_LIMIT_GB); log tail:\n{tail}"))
        elif timed_out:
            where = " (still importing / building the candidate)" if mode == "eval" and not res.get("compiled") else ""
            res.update(status="timeout", error_type="Timeout", correct=False, speedup=None, speedup_rounded=None,
                       error=_truncate(f"no result within {timeout_s:.0f} s{where}; log tail:\n{tail}"))
        elif not res.pop("final", False):
            sig = -rc if rc < 0 else None
            res.update(status="crash", correct=False, speedup=None, speedup_rounded=None,
                       error_type=signal.Signals(sig).name if sig in signal.valid_signals() else f"exit({rc})",
                       error=_truncate(f"the child died without a result (exit status {rc}); log tail:\n{tail}"))
        res.pop("final", None)
        return res
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def evaluate(task_src: str, candidate_src: str, *, task_name: str = "task", device: str = "cuda",
             protocol: str = "strict", atol: float = 1e-2, rtol: float = 1e-2, num_correct_trials: int | None = None,
             timeout_s: float = 300.0, arch: str | None = None, build_root: str | None = None,
             static_checks: bool = True, time_budget_s: float = 2.0, remeasure_above: float = 3.0,
             check_only: bool = False, flags_override: dict | None = None, extra_env: dict | None = None,
             _gpu: str | None = None, _gpu_lock: str | None = None) -> dict:
    """Compiles, checks and times one candidate against its task in a child process; returns the result record.

    protocol: one of PROTOCOLS (module docstring); atol/rtol: isclose tolerances (KernelBench published results:
    1e-2); num_correct_trials: None = the protocol's (5, 5, 10); timeout_s: wall seconds for the whole child
    (build included); arch: TORCH_CUDA_ARCH_LIST for the candidate's nvcc builds; time_budget_s: seconds the
    strict protocol's timed calls should take; remeasure_above: speedups above it are timed twice, the lower
    counts (CUDA-L1 §1.3); check_only: correctness only, no timing (speedup None); static_checks=False for
    trusted baselines. For trusted baselines only (both need static_checks=False, else ValueError):
    flags_override, e.g. {"cudnn_benchmark": True}: backend flags (keys of FIXED_FLAGS) in force during the
    candidate's own code (import, construction, calls), not flagged; the reference keeps FIXED_FLAGS;
    extra_env: variables added to the child's scrubbed environment, e.g. TORCHINDUCTOR_CACHE_DIR and
    TRITON_CACHE_DIR so torch.compile reuses a warm cache (the child's private TMPDIR makes every compile cold).
    _gpu: CUDA_VISIBLE_DEVICES for the child; _gpu_lock: a lock file the child holds from its first correctness
    trial to the end of timing (both set by evaluate_many, which starts the next child while one is timed).
    Raises ValueError for a bad argument; never raises for a bad candidate.
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {PROTOCOLS}, not {protocol!r}")
    if (flags_override or extra_env) and static_checks:
        raise ValueError("flags_override and extra_env are for trusted baselines only: pass static_checks=False")
    bad = set(flags_override or {}) - set(FIXED_FLAGS)
    if bad:
        raise ValueError(f"flags_override keys must be among {sorted(FIXED_FLAGS)}, not {sorted(bad)}")
    t0 = time.perf_counter()
    res = _blank_result(task_name, candidate_src, protocol, device)
    res["flags_override"] = dict(flags_override) if flags_override else None
    verdict = static_check(candidate_src, task_src) if static_checks else None
    if verdict:
        res.update(status=verdict[0], hack=verdict[1], error=verdict[2],
                   error_type="SyntaxError" if verdict[0] == "compile_error" else "StaticCheck")
    else:
        spec = dict(device=device, atol=atol, rtol=rtol, task_src=task_src, protocol=protocol,
                    num_correct_trials=num_correct_trials or PROTOCOL_TRIALS[protocol], time_budget_s=time_budget_s,
                    remeasure_above=remeasure_above, check_only=check_only, flags_override=flags_override,
                    gpu_lock=_gpu_lock)
        env = dict(extra_env or {}, **({"CUDA_VISIBLE_DEVICES": _gpu} if _gpu is not None else {}))
        _run_child("eval", res, dict(task=task_src, candidate=candidate_src), spec, timeout_s, arch,
                   os.path.abspath(build_root) if build_root else default_build_root(), env)
    res["eval_s"] = time.perf_counter() - t0
    return res


def degenerate_screen(task_src: str, *, task_name: str = "task", device: str = "cuda", atol: float = 1e-2,
                      rtol: float = 1e-2, num_correct_trials: int = 5, timeout_s: float = 600.0,
                      build_root: str | None = None, arch: str | None = None) -> dict:
    """REFERENCE.md §3 (issue 6 item 3): does a trivial output pass this task's correctness check?

    Runs the reference on the same seeded inputs a candidate's trials get and puts each of TRIVIAL_OUTPUTS (zeros;
    constant = the reference's output on other inputs; mean = its mean everywhere; input = the first input
    reshaped) through the same check (_check, kernel_eval.cu's compare on CUDA), in one child process.
    Returns {task, degenerate (bool; None if the screen itself failed), passed (names that passed every trial),
    results ({name: "passed" | "incorrect: ..." | "n/a: ..." | ...}), status (ok | runtime_error | timeout |
    crash), error, trials, atol, rtol, device, device_name, eval_s}.
    """
    t0 = time.perf_counter()
    res = dict(task=task_name, degenerate=None, passed=[], results={}, status="crash", error="", error_type="",
               trials=0, atol=atol, rtol=rtol, device=device, device_name="cpu" if device == "cpu" else None)
    spec = dict(device=device, atol=atol, rtol=rtol, task_src=task_src, num_correct_trials=num_correct_trials)
    _run_child("screen", res, dict(task=task_src), spec, timeout_s, arch,
               os.path.abspath(build_root) if build_root else default_build_root())
    if res["status"] != "ok":
        res["degenerate"] = None
    res["eval_s"] = time.perf_counter() - t0
    return res


def _build_child(candidate_src, device, arch, build_root, timeout_s, kernel_eval=False, extra_env=None):
    res = dict(candidate_hash=_hash(candidate_src), status="crash", compiled=False, error="", error_type="",
               compile_s=None)
    return _run_child("build", res, dict(candidate=candidate_src), dict(device=device, kernel_eval=kernel_eval),
                      timeout_s, arch, os.path.abspath(build_root) if build_root else default_build_root(),
                      extra_env)


def build(candidate_src, *, device="cuda", arch=None, build_root=None, timeout_s=600.0) -> dict:
    """Build-only: imports the candidate in a child (its load_inline calls fill the build cache), then exits.
    Returns {candidate_hash, status (ok | compile_error | runtime_error | timeout | crash), compiled, error,
    error_type, compile_s (s)}; runtime_error means the import failed for a reason other than a build."""
    return _build_child(candidate_src, device, arch, build_root, timeout_s)


def evaluate_many(jobs, *, build_workers=None, progress=False, gpus=None, overlap=True, on_result=None,
                  per_gpu=2, **kw):
    """evaluate() for [(task_name, task_src, candidate_src[, overrides]), ...], results in the same order.

    Builds every distinct candidate (and kernel_eval.cu) ahead of time in parallel child processes, `build_workers`
    at a time (default: the CPU count less 2 per GPU when overlapping, so the timed children keep CPUs of their
    own; else the CPU count), into the build cache; evaluates one job at a time per GPU (gpus: CUDA_VISIBLE_DEVICES
    ids, default all visible GPUs for device="cuda"), so timings never share a GPU: up to `per_gpu` children per
    GPU are alive at once, but a child holds that GPU's lock file from its first correctness trial to the end of
    its timing, so the next child's start (interpreter, imports, CUDA context, loading the candidate, building the
    models: ~2-3 s) overlaps the current one's checks and timing, and only that. overlap=True starts a job's
    evaluation as soon as its own build (and kernel_eval's) is done, while the other builds go on (issue 6 item 7:
    RL should not wait for the slowest compile); overlap=False evaluates only after every build, on a quiet CPU.
    overrides: a dict of evaluate() keywords for that job only (e.g. extra_env for one trusted baseline).
    on_result(i, result) is called as each job finishes (from a worker thread), e.g. to save it at once.
    A candidate whose build failed or timed out is not built again. One job's failure never stops the others.
    """
    jobs = [tuple(j) + ({},) if len(j) == 3 else tuple(j) for j in jobs]
    for j in jobs:                                        # a wrong keyword fails here, not once per job
        inspect.signature(evaluate).bind("", "", **dict(kw, **j[3]))
        jkw = dict(kw, **j[3])
        if (jkw.get("flags_override") or jkw.get("extra_env")) and jkw.get("static_checks", True):
            raise ValueError("flags_override and extra_env are for trusted baselines only: pass static_checks=False")
    build_root = kw["build_root"] = os.path.abspath(kw.get("build_root") or default_build_root())
    device, arch = kw.get("device", "cuda"), kw.get("arch")
    if gpus is None:
        seen = os.environ.get("CUDA_VISIBLE_DEVICES")
        n = torch.cuda.device_count() if device == "cuda" else 0
        gpus = ([g.strip() for g in seen.split(",") if g.strip()][:n] if seen else [str(i) for i in range(n)])
    slots = list(gpus) or [None]
    lock_dir = tempfile.mkdtemp(prefix="cudal1_gpulock_")
    locks = {g: (os.path.join(lock_dir, f"gpu{g}.lock") if g is not None and per_gpu > 1 else None) for g in slots}
    todo = {}
    for _, task_src, cand_src, o in jobs:
        jkw = dict(kw, **o)
        if not (jkw.get("static_checks", True) and static_check(cand_src, task_src)):
            todo.setdefault(_hash(cand_src), (cand_src, jkw.get("extra_env")))
    items = [(h, src, env) for h, (src, env) in todo.items()]
    if device.startswith("cuda"):
        items.insert(0, ("kernel_eval", None, None))      # first: every evaluation needs it
    say = (lambda msg: print(f"[bench] {msg}", file=sys.stderr, flush=True)) if progress else (lambda msg: None)
    workers = build_workers or max(1, cpu_count() - (2 * len(slots) if overlap else 0))
    timeout = max(600.0, kw.get("timeout_s", 300.0))
    done = [0]
    bpool = ThreadPoolExecutor(max(1, min(workers, len(items) or 1)))

    def build_one(h, src, env):
        try:
            r = _build_child(src, device, arch, build_root, timeout, src is None, env)
        except Exception as e:                            # should not happen; evaluate() will build it then
            r = dict(status="crash", error=f"{type(e).__name__}: {e}")
        done[0] += 1
        say(f"build {done[0]}/{len(items)} {h} {r['status']} {r.get('compile_s') or 0:.1f} s")
        return r
    builds = {h: bpool.submit(build_one, h, src, env) for h, src, env in items}
    if not overlap:
        for f in builds.values():
            f.result()
    results = [None] * len(jobs)

    def one(i, g):
        name, task_src, cand_src, o = jobs[i]
        b = builds[_hash(cand_src)].result() if _hash(cand_src) in builds else None
        try:
            if b and b["status"] in ("compile_error", "timeout"):
                r = _blank_result(name, cand_src, kw.get("protocol", "strict"), device)
                r.update({k: b.get(k) for k in ("status", "error", "error_type", "compile_s")}, eval_s=0.0)
            else:
                r = evaluate(task_src, cand_src, task_name=name, **dict(kw, **o, _gpu=g, _gpu_lock=locks[g]))
        except Exception as e:
            r = _blank_result(name, cand_src, kw.get("protocol", "strict"), device)
            r.update(error=_truncate(f"{type(e).__name__}: {e}"), error_type=type(e).__name__)
        results[i] = r
        if on_result is not None:
            on_result(i, r)
        say(f"eval {i + 1}/{len(jobs)}{'' if g is None else f' gpu {g}'} {result_summary(r)}")

    # A job is ready once its own build and kernel_eval's are done; one thread per GPU takes ready jobs in the
    # order their builds finished, so no GPU waits on a slow compile while another candidate is ready.
    ready, pending = __import__("queue").Queue(), set(range(len(jobs)))

    def release():
        for i in sorted(pending):
            deps = [builds[k] for k in ("kernel_eval", _hash(jobs[i][2])) if k in builds]
            if all(f.done() for f in deps):
                pending.discard(i)
                ready.put(i)
    feed = ThreadPoolExecutor(1)                          # release() runs on one thread: no two at once

    def on_built(_f):
        with contextlib.suppress(RuntimeError):           # after the final release() below: nothing left to do
            feed.submit(release)
    feed.submit(release)
    for f in builds.values():
        f.add_done_callback(on_built)

    stop = []

    def worker(g):
        while True:
            i = ready.get()
            if i is None or stop:
                return
            one(i, g)
    workers_of = [g for g in slots for _ in range(per_gpu if locks[g] else 1)]
    pool = ThreadPoolExecutor(len(workers_of))
    ws = [pool.submit(worker, g) for g in workers_of]
    try:
        for f in builds.values():
            f.result()
        feed.shutdown(wait=True)
        release()
        assert not pending, f"jobs never released: {sorted(pending)}"
        for _ in workers_of:
            ready.put(None)
        for w in ws:                                      # the normal path: every evaluation done
            w.result()
    except BaseException:
        stop.append(True)                                 # Ctrl-C / SIGTERM: no new evaluation starts, and
        for _ in workers_of:                              # those in flight end below (their results kept, e.g.
            ready.put(None)                               # by on_result) before the interrupt goes on
        raise
    finally:
        pool.shutdown(wait=True)
        bpool.shutdown(wait=True, cancel_futures=True)
        feed.shutdown(wait=True)
        shutil.rmtree(lock_dir, ignore_errors=True)
    return results


def main(argv=None):
    ap = argparse.ArgumentParser(description="Check and time a KernelBench candidate against its task.")
    ap.add_argument("task", help="task module (Model, get_inputs, get_init_inputs)")
    ap.add_argument("candidate", help="candidate module (ModelNew)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", choices=["cuda", "cpu"])
    ap.add_argument("--arch", default=None, help="TORCH_CUDA_ARCH_LIST for nvcc, e.g. 9.0")
    ap.add_argument("--json", action="store_true", help="print the whole result record as JSON")
    ap.add_argument("--timeout_s", type=float, default=300.0)
    ap.add_argument("--trials", type=int, default=None, help="correctness trials (default: the protocol's)")
    ap.add_argument("--no_static_checks", action="store_true")
    ap.add_argument("--build_root", default=None)
    ap.add_argument("--protocol", default="strict", choices=PROTOCOLS)
    ap.add_argument("--check_only", action="store_true", help="correctness only, no timing")
    a = ap.parse_args(argv)
    for p in (a.task, a.candidate):
        if not os.path.isfile(p):
            sys.exit(f"error: no such file: {p}")
    if a.device == "cuda" and not torch.cuda.is_available():
        sys.exit("error: --device cuda but torch sees no CUDA GPU (a CPU build of torch, or no driver); use --device cpu")
    res = evaluate(open(a.task).read(), open(a.candidate).read(), task_name=os.path.basename(a.task)[:-3],
                   device=a.device, arch=a.arch, timeout_s=a.timeout_s, num_correct_trials=a.trials,
                   static_checks=not a.no_static_checks, build_root=a.build_root, protocol=a.protocol,
                   check_only=a.check_only)
    print(json.dumps(res) if a.json else result_summary(res))
    return 0 if res["status"] == "ok" else 1


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--_child":
        _child_main(sys.argv[2])
    sys.exit(main())
