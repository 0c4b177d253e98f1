"""buildcache.py: torch's load_inline with a build cache shared by processes, as it runs inside a candidate's process.

runner.py installs it (install_build_cache) before a candidate is imported, so every load_inline of the candidate,
however imported, builds once per source and flag set and candidate (its build ahead and its timed runner share the
entries; other candidates never do: sandbox.py lets a runner write only its own), in parallel with other builds, and
is loaded directly on a hit (no ninja). Builds are made faster than plain load_inline (REFERENCE.md §2):
  - main.cpp starts with a light prelude (the tensor API, pybind11 and torch's exception wrapper: _LIGHT_CPP), from
    a GCC precompiled header built once per flag set; a main.cpp that needs more of torch (torch::nn, ...) is
    rebuilt with <torch/extension.h> (and its own precompiled header), as load_inline would build it;
  - cuda.cu gets only the CUDA runtime headers when its source cannot need torch's (raw-pointer kernels: ~1.5 s of
    nvcc instead of ~30 s), and torch/types.h when it does or when the light build fails.
A build's failure keeps its first compiler error (first_error) for the record, and a compiler's verdict is cached
too (a "failed" marker: the same sources fail at once the next time); a build the candidate caught and survived is
remembered (BUILD_FAILURES: the "fallback" hack). Calls into extension functions are counted
(EXT_CALLS: custom_kernel_calls). Everything here runs in the candidate's process: the parent trusts none of it.
"""
import contextlib, fcntl, hashlib, importlib.util, json, os, pathlib, re, shlex, subprocess, tempfile, types

import torch
from torch.utils import cpp_extension

from harness import cores  # noqa: E402
from harness.runner import default_build_root, truncate, _write_json  # noqa: E402


def first_error(text):
    """The first compiler or linker error of a build log and the lines that locate it."""
    lines = str(text).splitlines()
    for i, ln in enumerate(lines):
        if re.search(r"\berror\b\s*[:(]|undefined reference|undefined symbol|fatal error", ln, re.I) and \
                not ln.lstrip().startswith(("FAILED", "ninja: build stopped", "[")):
            start = i - 1 if i and re.search(r"In (member )?function|In instantiation|required from", lines[i - 1]) \
                else i
            out = [re.sub(r"/\S*/([^/\s]+\.(?:cpp|cu|h|cuh|o|so))", r"\1", x) for x in lines[start:i + 6]]
            return "\n".join(out).strip()
    return truncate(text)



class BuildError(RuntimeError):
    """A load_inline build failed (compiler or linker error); reported as "compile_error"."""


ENTRIES = []              # a runner's own build entries folder (set by the fork server), or [] in a trusted process
_ORIG_LOAD_INLINE, _ORIG_LOAD = cpp_extension.load_inline, cpp_extension.load
_LOADED = {}              # .so path -> module, so one process loads each extension once
BUILD_FAILURES = []       # first error of each failed build in this process (caught by the candidate: "fallback")
PCH_MAX = 8               # at most this many precompiled headers (~0.5-0.8 GB each)
_LIGHT_PRELUDE = ["#include <cuda.h>", "#include <cuda_runtime.h>"]
_FULL_PRELUDE = ["#include <torch/types.h>"] + _LIGHT_PRELUDE           # what load_inline prepends
_MENTIONS_TORCH = re.compile(r"torch|ATen|\bat::|\bc10|\bC10_|\bTORCH_|\bAT_|Tensor")
# main.cpp's first try: the tensor API, pybind11 and torch's exception wrapper, without torch/all.h's C++ frontend
# (nn, optim, data...): a third less to parse, a smaller precompiled header. A compile error retries with
# torch/extension.h, what load_inline uses, so nothing plain load_inline builds is rejected.
_HEADER_MISS = re.compile(r"is not a member of|was not declared|has not been declared|does not name a type|"
                          r"incomplete type|no member named|No such file|not a namespace|"       # g++, light too light?
                          r'identifier "[^"]*" is undefined|has no member|must be a class or namespace|'  # nvcc
                          r"no instance of|is not a template|explicit type is missing|is not a type name|"
                          r"cannot open source file")
# cpp_sources that include torch/extension.h themselves had all of it in the light try, so its failure is final;
# the retry would also fail falsely: with that header precompiled, GCC cannot re-include it ("torch/extension.h:
# No such file or directory" in the precompiled header's folder), hiding the real first error
_OWN_EXTENSION_H = re.compile(r'#\s*include\s*[<"]torch/extension\.h[>"]')
_LIGHT_CPP = "#include <torch/types.h>\n#include <torch/csrc/utils/pybind.h>\n#include <torch/csrc/Exceptions.h>\n"
# The split build's two translation units, compiled side by side (a fresh build in <= 4 s): main.cpp
# holds the candidate's cpp_sources under torch/types.h alone, glue.cpp their declarations and load_inline's pybind
# block under pybind11 and torch's exception wrapper (torch::Tensor and the other at:: names as torch/types.h spells
# them). Each costs about half of the light main.cpp: on a 2-core CPU machine 3.1-4.2 s and 3.9 s against 7.1-7.5 s
# for the one-kernel main.cpp (most of it the headers' own template instantiation and code, which a precompiled
# header does not save), and the two run at once. CUDAL1_SPLIT: auto (default: builds with CUDA sources, i.e. a GPU's
# candidates; every split build needs two more precompiled headers, which on a 2-core machine's tests cost more than
# they save), 1 (every build), 0 (none; evaluate_many's runners for a batch that fills the build cores, where a
# split build's second unit is only more work: batch.split_builds).
_SPLIT_A = "#include <torch/types.h>\n"
_SPLIT_B = ("#include <torch/csrc/utils/pybind.h>\n#include <torch/csrc/Exceptions.h>\n"
            "namespace torch { using namespace at; }\n")
_OURS = {True: ("cudal1_light.h", _LIGHT_CPP), "a": ("cudal1_a.h", _SPLIT_A), "b": ("cudal1_b.h", _SPLIT_B)}


_EXT_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]torch/extension\.h[">][^\n]*$', re.M)
_NEEDS_EXTENSION = re.compile(r"PYBIND11|pybind11|\bpy::|torch::nn\b|torch::optim|torch::jit|torch::autograd|"
                              r"torch::python|Python\.h|PyObject")


_CUDA_BUILTINS = {"threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize", "__global__", "__device__",
                  "__shared__", "__syncthreads", "__host__", "__constant__"}


def needs_more_headers(msg, unit, own_names=()):
    """Whether a failed build's log blames `unit` (main.cpp or cuda.cu) with an error a fuller prelude could fix: an
    undeclared name, a missing member or header. A syntax or type error in the candidate's own code is final, and so
    is the pybind block naming one of the candidate's own functions (`own_names`) its cpp_sources never declared
    (the commonest CUDA-L1 build failure). Retrying those cost 10-50 s of nvcc each (torch/types.h) under every
    broken RL sample (in an H200 demo every compile error was built two or three times)."""
    pat = re.compile(rf"{re.escape(unit)}(?:\(\d+\)|:\d+:\d+):\s*(?:fatal |catastrophic )?error\b.*")
    errors = [m.group(0) for m in pat.finditer(str(msg))]
    own = {str(n) for n in own_names} | _CUDA_BUILTINS    # CUDA code in cpp_sources: no header of torch helps
    for e in errors:
        name = re.search(r"[‘'`]([A-Za-z_]\w*)[’'`] (?:was not declared|does not name a type)", e)
        if _HEADER_MISS.search(e) and not (name and name.group(1) in own):
            return True
    return False


def lighten_cuda(src):
    """A CUDA source with its own `#include <torch/extension.h>` turned into a comment, or None when it has none or
    may need more than torch/types.h (pybind11, torch::nn...). load_inline already puts torch/types.h on top of
    cuda.cu; torch/extension.h adds the C++ frontend and Python, ~2x the nvcc time (75 s against 32 s for a
    one-kernel file on a 2-core box) and nothing a kernel file uses. A compile error retries with the
    source as written, so nothing plain load_inline builds is rejected."""
    if not _EXT_INCLUDE.search(src) or _NEEDS_EXTENSION.search(src):
        return None
    return _EXT_INCLUDE.sub("// #include <torch/extension.h>: torch/types.h above is enough (bench's build cache)", src)


def _as_list(x, strip=False):
    x = [x] if isinstance(x, str) else list(x or [])
    return [s.strip() if strip and isinstance(s, str) else s for s in x]


def inline_args(name, cpp_sources, cuda_sources=None, functions=None, extra_cflags=None, extra_cuda_cflags=None,
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


def build_key(args):
    env = dict(torch=torch.__version__, cuda=torch.version.cuda, arch=os.environ.get("TORCH_CUDA_ARCH_LIST", ""),
               cxx=os.environ.get("CXX", ""), cuda_home=cpp_extension.CUDA_HOME or "", layout=2)
    return hashlib.sha256(json.dumps([args, env], sort_keys=True, default=repr).encode()).hexdigest()[:32]


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


def _pch_dir(root, args, light):
    """An include folder holding a GCC precompiled header for main.cpp's prelude built with this build's exact flags
    (torch's own ninja file's), or None. light: one of our preludes (_OURS: True for cudal1_light.h, "a" and "b"
    for the split build's two); False: torch/extension.h.

    The idea of load_inline(use_pch=True), kept in our cache, one per flag set, written atomically and never waited
    for: while one process builds it, the others compile without. GCC checks a .gch against the compile's options
    and silently ignores one that does not match, so a mistake here can only cost speed."""
    ce = cpp_extension
    if os.environ.get("CUDAL1_PCH", "1") == "0" or args["no_implicit_headers"]:
        return None
    try:
        cxx = ce.get_cxx_compiler()
        if not ce.check_compiler_is_gcc(cxx):
            return None
        with_cuda = args["with_cuda"] if args["with_cuda"] is not None else bool(args["cuda"])
        with tempfile.TemporaryDirectory() as t:          # torch writes the flags it would compile main.cpp with
            ce._write_ninja_file_to_build_library(
                path=os.path.join(t, "build.ninja"), name="pch", sources=[os.path.join(t, "main.cpp")],
                extra_cflags=args["cflags"], extra_sycl_cflags=[], extra_ldflags=[],
                extra_cuda_cflags=["-arch=unused"],   # (the nvcc line is not used; without an arch flag torch asks
                                                      # the GPU for one: a CUDA context in bench's parent)
                extra_include_paths=args["includes"], with_cuda=with_cuda, with_sycl=False, is_standalone=False)
            line = next(x for x in open(os.path.join(t, "build.ninja")) if x.startswith("cflags = "))
        flags = [f for f in shlex.split(line[len("cflags = "):]) if not f.startswith("-DTORCH_EXTENSION_NAME=")]
        torch_header = os.path.join(os.path.dirname(torch.__file__), "include", "torch", "extension.h")
        sig = hashlib.sha256(json.dumps([cxx, light and _OURS[light][1], torch_header, flags,
                                         torch.__version__]).encode()).hexdigest()[:16]
        top, d = os.path.join(root, "pch"), os.path.join(root, "pch", sig)
        name = _OURS[light][0] if light else os.path.join("torch", "extension.h")
        header, gch = (os.path.join(d, name) if light else torch_header), os.path.join(d, name + ".gch")
        if ENTRIES:                                       # a runner only reads them: one it made could be read by
            return d if os.path.exists(gch) else None    # another candidate's compiler (made by prebuild_pch)
        if light and not os.path.exists(header):
            os.makedirs(d, exist_ok=True)
            with open(header + f".tmp{os.getpid()}", "w") as f:
                f.write(_OURS[light][1])
            os.replace(header + f".tmp{os.getpid()}", header)
        if os.path.exists(gch):
            return d
        os.makedirs(top, exist_ok=True)
        if os.path.exists(os.path.join(d, "failed")) or \
                len([n for n in os.listdir(top) if not n.endswith(".lock")]) >= PCH_MAX:
            return d if light else None
        with open(d + ".lock", "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return d if light else None              # someone is building it: don't wait
            if os.path.exists(gch):
                return d
            os.makedirs(os.path.dirname(gch), exist_ok=True)
            with contextlib.suppress(FileNotFoundError):
                os.remove(gch + ".tmp")                  # left by a builder killed at its timeout
            p = subprocess.run(shlex.split(cxx) + ["-x", "c++-header", header, "-o", gch + ".tmp"] + flags,
                               capture_output=True, timeout=900)
            if p.returncode != 0:
                with open(os.path.join(d, "failed"), "w") as f:
                    f.write(p.stderr.decode(errors="replace")[-4000:])
                return d if light else None
            os.replace(gch + ".tmp", gch)
            return d
    except Exception:
        return None


def prebuild_pch(root=None, with_cuda=True, split=True):
    """The precompiled header of main.cpp's light prelude for a candidate without extra flags or include folders (the
    usual one), made now in this process: its folder, or None (no GCC, no CUDA_HOME for with_cuda, CUDAL1_PCH=0).

    evaluate_many (batch.prebuild_pch) starts it in a thread of the parent before the batch's first build: the
    builds ahead run at nice 10 in runners that start ~5 s later, so at normal priority it is not slowed by the batch
    it serves. Made inside the first build instead, it was ready, by the builds' times, only at ~30 s among 14 builds
    on the H200: the builds started before then took 14-19 s, those after 7-10 s (without the header main.cpp costs
    2-2.5x the CPU time). Same flags as a candidate's own try, hence the same signature and folder
    (tests/test_build_failures.py). split: the split build's two headers first (batch.split_builds says when a batch
    needs them)."""
    args = inline_args("pch", ["void f();"], ["void g() {}"] if with_cuda else None, ["f"], with_cuda=with_cuda)
    root = root or default_build_root()
    if split:                                            # the split build's two headers at once, then the light
        _split_dirs(root, args)                          # one (for the builds the split cannot take)
    return _pch_dir(root, args, light=True)


def _split_dirs(root, args):
    """The include folders of the split build's two preludes: each one's precompiled header made at once (two
    compilers side by side, as the two units build), or its plain header where none can be had."""
    import concurrent.futures
    with concurrent.futures.ThreadPoolExecutor(2) as ex:
        return [p or _light_dir(root, k) for p, k in zip(ex.map(lambda k: _pch_dir(root, args, light=k), "ab"), "ab")]


def _light_dir(root, kind=True):
    """A folder holding our prelude `kind` (_OURS) as a header, for builds without its precompiled header."""
    name, text = _OURS[kind]
    d = os.path.join(ENTRIES[0] if ENTRIES else root, "light")      # a runner's own copy: it writes nowhere else
    path = os.path.join(d, name)
    if not (os.path.exists(path) and pathlib.Path(path).read_text() == text):
        os.makedirs(d, exist_ok=True)
        tmp = os.path.join(d, f"{name}.tmp{os.getpid()}")
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    return d


_NO_SPLIT = re.compile(r'\bnamespace\b|\btemplate\b|#\s*define|PYBIND11|pybind11|\bpy::|extern\s*"C"|'
                       r"\bstatic\b|\binline\b|torch/extension\.h|torch::python|Python\.h|PyObject")
_RET = re.compile(r"^(?:const\s+)?[A-Za-z_][\w:]*(?:\s*<[\w:<>,\s\*&]*>)?(?:\s*[\*&])*$")


def split_declarations(cpp, names):
    """"RET f(PARAMS);" for each function of load_inline's `functions`, as cpp_sources (one text) defines or declares
    it at file scope, for the split build's glue.cpp; None when one cannot be read plainly (a template, a namespace, a
    macro, internal linkage, pybind11 of its own...): then the build is not split. A declaration read wrongly only
    costs the split try: its compile, link or import fails and the one-file build follows."""
    if not names or _NO_SPLIT.search(cpp):
        return None
    text = re.sub(r"//[^\n]*|/\*.*?\*/", " ", cpp, flags=re.S)           # comments out
    text = re.sub(r"^[ \t]*#[^\n]*", " ", text, flags=re.M)              # preprocessor lines out
    out = []
    for f in names:
        for m in re.finditer(rf"\b{re.escape(f)}\s*\(", text):
            start = max(text.rfind(c, 0, m.start()) for c in ";{}") + 1  # the statement this name starts
            ret = " ".join(text[start:m.start()].split())
            depth, i = 1, m.end()
            while i < len(text) and depth:                                # the parameters: balanced parentheses
                depth += {"(": 1, ")": -1}.get(text[i], 0)
                i += 1
            after = text[i:].lstrip()[:1]
            if depth == 0 and after in ("{", ";") and _RET.match(ret) and ret not in ("return", "else", "do"):
                out.append(f"{ret} {f}({' '.join(text[m.end():i - 1].split())});")
                break
        else:
            return None
    return out


def _compile_extension(args, d, module, verbose, root):
    """Writes the sources as load_inline would and builds them with cpp_extension.load into folder d. Never verbose:
    with verbose=True torch sends the compiler's output to stdout and its exception says only "Error building
    extension", so the failure was neither recognised as final nor explained (CUDA-L1 A100 level3/45 asks for it:
    its failed 205 s build was compiled again under the GPU's lock)."""
    ce = cpp_extension
    body, block = list(args["cpp"]), []
    if args["functions"]:                                   # the pybind block exactly as load_inline writes it
        wrap = "torch::wrap_pybind_function({})" if args["error_handling"] else "{}"
        block = ["PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {"] + [
            f'm.def("{f}", {wrap.format(f)}, "{doc}");' for f, doc in args["functions"].items()] + ["}"]
    # (main.cpp prelude, function giving its include dirs, glue.cpp or None): the split build first (main.cpp and
    # glue.cpp side by side, where the functions' declarations can be read), then the light prelude,
    # torch/extension.h (what load_inline uses) when the light one lacks a declaration; each with its precompiled
    # header where possible
    tries = [(None, lambda: [], None)] if args["no_implicit_headers"] else [
        ("#include <cudal1_light.h>", lambda: [_pch_dir(root, args, light=True) or _light_dir(root)], None),
        ("#include <torch/extension.h>", lambda: [p for p in [_pch_dir(root, args, light=False)] if p], None)]
    split = os.environ.get("CUDAL1_SPLIT", "auto")      # auto: builds with CUDA sources (a GPU's candidates; a CPU
    split = split == "1" or (split == "auto" and bool(args["cuda"]))   # machine's tests and demos keep one header)
    decls = None if args["no_implicit_headers"] or not split or not args["functions"] \
        else split_declarations("\n".join(args["cpp"]), list(args["functions"]))
    if decls:
        tries.insert(0, ("#include <cudal1_a.h>", lambda: _split_dirs(root, args),
                         "\n".join(["#include <cudal1_b.h>"] + decls + block)))
    cuda_tries = [list(args["cuda"])]                            # cuda.cu as load_inline would write it...
    if args["cuda"] and not args["no_implicit_headers"]:
        # torch/types.h costs ~30 s of nvcc (REFERENCE.md §2); skip it when the CUDA code cannot need it, and
        # retry with it should that fail, so we never reject what plain load_inline accepts; likewise a CUDA
        # source's own torch/extension.h (lighten_cuda) is tried without it first.
        text = "\n".join(args["cuda"])
        light = lighten_cuda(text)
        full = _FULL_PRELUDE + list(args["cuda"])
        cuda_tries = ([_FULL_PRELUDE + [light]] if light else []) + [full] if _MENTIONS_TORCH.search(text) else \
            [_LIGHT_PRELUDE + list(args["cuda"]), full]
    main, ci, ui = os.path.join(d, "main.cpp"), 0, 0          # which prelude of main.cpp / cuda.cu now
    while True:
        cpp_prelude, incs, glue = tries[ci]
        _write_if_changed(main, "\n".join(([cpp_prelude] if cpp_prelude else []) + body + ([] if glue else block)))
        sources = [main] + ([_write_if_changed(os.path.join(d, "glue.cpp"), glue)] if glue else [])
        if args["cuda"]:
            sources.append(_write_if_changed(os.path.join(d, "cuda.cu"), "\n".join(cuda_tries[ui])))
        getattr(ce.JIT_EXTENSION_VERSIONER, "entries", {}).pop(module, None)   # a retry keeps the module name,
        try:                                                                     # ninja recompiles what changed
            load = getattr(ce.load, "__wrapped__", ce.load)       # the call-counting wrapper: not here, nor
            load = _ORIG_LOAD if load is cached_load else load    # cached_load (these sources are the key's)
            # -I comes before torch's -isystem folders, so GCC finds the .gch first
            result = load(name=module, sources=sources, extra_cflags=args["cflags"],
                          extra_cuda_cflags=args["cuda_cflags"], extra_ldflags=args["ldflags"],
                          extra_include_paths=list(args["includes"]) + incs(), build_directory=d, verbose=False,
                          with_cuda=args["with_cuda"], is_python_module=args["is_python_module"])
            break
        except Exception as e:
            msg = str(e)
            if ui + 1 < len(cuda_tries) and needs_more_headers(msg, "cuda.cu"):
                ui += 1                   # cuda.cu needs torch's types (or its own headers) after all
            elif glue and (needs_more_headers(msg, "main.cpp") or not any(
                    re.search(rf"{u}(?:\(\d+\)|:\d+:\d+):\s*(?:fatal |catastrophic )?error", msg)
                    for u in (r"main\.cpp", r"cuda\.cu"))):
                ci += 1                   # the split build failed elsewhere (glue.cpp, the link, the import) or
                                          # main.cpp lacked a declaration: the one-file build, as load_inline's
            elif ci + 1 < len(tries) and needs_more_headers(msg, "main.cpp", args["functions"] or ()) \
                    and not _OWN_EXTENSION_H.search("\n".join(args["cpp"])):
                ci += 1                   # main.cpp needs more of torch than the light prelude declares
            else:
                raise
    so = f"{result.__name__}{ce.LIB_EXT}" if args["is_python_module"] else os.path.basename(result)
    _LOADED[os.path.join(d, so)] = result
    _write_json(os.path.join(d, "done"), dict(module=getattr(result, "__name__", module), so=so))
    return result


def cached_load_inline(name, cpp_sources, cuda_sources=None, functions=None, extra_cflags=None,
                       extra_cuda_cflags=None, extra_ldflags=None, extra_include_paths=None, build_directory=None,
                       verbose=False, with_cuda=None, is_python_module=True, with_pytorch_error_handling=True,
                       keep_intermediates=True, use_pch=False, no_implicit_headers=False, **other):
    """Drop-in torch.utils.cpp_extension.load_inline with a cross-process build cache.

    Layout: <build_root>/<key>/ (sources, ninja files, objects, <name>_<key[:12]>.so, a `done` marker written after a
    successful build, or a `failed` marker holding a compiler's or linker's error), <build_root>/<key>.lock (an
    fcntl lock held while building: the OS drops it if the builder dies), <build_root>/pch/<sig>/ (precompiled
    headers). key = sha256 of the arguments, torch and CUDA versions, TORCH_CUDA_ARCH_LIST and the compiler;
    build_root = $CUDAL1_BUILD_ROOT or ~/.cache/cudal1/build. In a runner the entries (<key>/, <key>.lock, light/)
    are in its candidate's own folder (ENTRIES, <build_root>/candidates/<candidate hash>/, the only part of the
    build root its sandbox lets it write: a planted extension reaches no other candidate) and the precompiled
    headers are read, never made (prebuild_pch in a trusted process makes them).
    The module is named f"{name}_{key[:12]}", so two candidates using the same `name=` never collide. A finished
    build is imported directly, without ninja. Holding the lock we are the only builder of that folder, so torch's
    own `lock` file there can only be left by a killed build and is removed (REFERENCE.md §2: it otherwise makes
    every later build wait forever). `build_directory`, `keep_intermediates` and `use_pch` are ignored; arguments
    load_inline may grow (sycl_sources, ...) go to it uncached. Raises BuildError when the build fails."""
    args = inline_args(name, cpp_sources, cuda_sources, functions, extra_cflags, extra_cuda_cflags, extra_ldflags,
                       extra_include_paths, with_cuda, is_python_module, with_pytorch_error_handling,
                       no_implicit_headers)
    other = {k: v for k, v in other.items() if v is not None}
    root = default_build_root()
    key = build_key(dict(args, other=other) if other else args)
    entries = ENTRIES[0] if ENTRIES else root
    d, module = os.path.join(entries, key), f"{name}_{key[:12]}"
    os.makedirs(d, exist_ok=True)
    if other:
        return _ORIG_LOAD_INLINE(module, cpp_sources, cuda_sources, functions=functions, extra_cflags=extra_cflags,
                                 extra_cuda_cflags=extra_cuda_cflags, extra_ldflags=extra_ldflags,
                                 extra_include_paths=extra_include_paths, build_directory=d, verbose=False,
                                 with_cuda=with_cuda, is_python_module=is_python_module,
                                 with_pytorch_error_handling=with_pytorch_error_handling,
                                 no_implicit_headers=no_implicit_headers, **other)
    hit = _load_built(d, args["is_python_module"]) or _failed_before(d)
    if hit is not None:
        return hit
    with open(os.path.join(entries, key + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        hit = _load_built(d, args["is_python_module"]) or _failed_before(d)   # built by someone else meanwhile
        if hit is not None:
            return hit
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(d, "lock"))
        try:
            with _on_build_cores():
                return _compile_extension(args, d, module, verbose, root)
        except Exception as e:
            msg = truncate(f"Error building extension '{name}': {first_error(e)}")
            if is_verdict(str(e)):
                _write_json(os.path.join(d, "failed"), dict(error=msg))
            BUILD_FAILURES.append(msg)
            raise BuildError(msg) from None


def cached_load(name, sources, extra_cflags=None, extra_cuda_cflags=None, extra_ldflags=None,
                extra_include_paths=None, build_directory=None, verbose=False, with_cuda=None, is_python_module=True,
                is_standalone=False, keep_intermediates=True, **other):
    """torch.utils.cpp_extension.load keyed by its sources' contents, not their paths: a candidate that writes its
    source into a fresh temp folder at import and loads it (some of the CUDA-L1 release do) builds once, ahead, and
    its timed runner reuses that build instead of compiling again under the GPU's lock, past the call limit. The
    sources are copied under their own names into <entries>/<key>/src/ (unchanged copies keep their mtime) and built
    in <entries>/<key>/ by torch's load, whose ninja then has nothing to do. Sources that include a file of their
    own folder (`#include "..."`), two sources of one name, or arguments this signature lacks go to torch's load as
    given. `build_directory` is ignored when cached. Raises BuildError when the build fails."""
    paths = [sources] if isinstance(sources, (str, os.PathLike)) else list(sources)
    flags = dict(extra_cflags=extra_cflags, extra_cuda_cflags=extra_cuda_cflags, extra_ldflags=extra_ldflags,
                 extra_include_paths=extra_include_paths, with_cuda=with_cuda, is_python_module=is_python_module,
                 is_standalone=is_standalone)
    try:
        texts = [(os.path.basename(str(p)), open(p).read()) for p in paths]
    except (OSError, UnicodeDecodeError):
        texts = None
    if texts is None or other or len({n for n, _ in texts}) < len(texts) or any('#include "' in t for _, t in texts):
        return _ORIG_LOAD(name, sources, build_directory=build_directory, verbose=verbose,
                          keep_intermediates=keep_intermediates, **flags, **other)
    key = build_key(dict(flags, name=name, sources=texts, loader="load"))
    entries = ENTRIES[0] if ENTRIES else default_build_root()
    d = os.path.join(entries, key)
    os.makedirs(os.path.join(d, "src"), exist_ok=True)
    copies = [_write_if_changed(os.path.join(d, "src", n), t) for n, t in texts]
    with open(os.path.join(entries, key + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)                  # one builder; torch's own `lock` can only be a dead one's
        _failed_before(d)
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(d, "lock"))
        try:
            with _on_build_cores():
                return _ORIG_LOAD(f"{name}_{key[:12]}", copies, build_directory=d, verbose=False, **flags)
        except Exception as e:
            msg = truncate(f"Error building extension '{name}': {first_error(e)}")
            if is_verdict(str(e)):
                _write_json(os.path.join(d, "failed"), dict(error=msg))
            BUILD_FAILURES.append(msg)
            raise BuildError(msg) from None


def _on_build_cores():
    """A runner's build on its build cores (cores.BUILD_CPUS: off the timing cores), also when it happens under the
    GPU's lock after `models` moved the runner to the timing cores: nvcc and ninja inherit the affinity."""
    return cores.pinned(cores.BUILD_CPUS)


# A compiler's or linker's verdict on these exact sources, flags and toolchain (the key) is final, so it is kept
# ("failed" beside "done"): the build ahead's failure is not compiled again (30-120 s each) in the timed runner,
# under the GPU's lock, as it was in the CUDA-L1 audit on the H200. A build killed, out of memory or
# interrupted is not a verdict and is not kept.
_DETERMINISTIC = re.compile(r"\berror\b\s*[:(]|undefined reference|undefined symbol|fatal error", re.I)
_NOT_DETERMINISTIC = re.compile(r"signal|Killed|died due to|out of memory|No space left|Interrupted|"
                                r"Resource temporarily unavailable|Cannot allocate|PCH files? .*invalid|"
                                r"error:[^\n]*pch/[0-9a-f]+/", re.I)   # an error ABOUT our precompiled headers
# (not their -I folder on the failed command line that ninja echoes: that one matched every build that used a
# precompiled header, so no such failure was kept and each was compiled again under the GPU's lock, e.g. CUDA-L1
# A100 level1/84 and level1/50: 8 and 97 s there)


def is_verdict(log):
    """Whether a failed build's log is the compiler's or linker's final word on these sources (kept as `failed`),
    not an accident of this machine (a killed compiler, a full disk, a stale precompiled header of ours)."""
    return bool(_DETERMINISTIC.search(log)) and not _NOT_DETERMINISTIC.search(log)


def _failed_before(d):
    """None, or raises the BuildError of an earlier failed build of the same key (kept as its "failed" marker)."""
    try:
        msg = json.load(open(os.path.join(d, "failed")))["error"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    BUILD_FAILURES.append(msg)
    raise BuildError(msg)


EXT_CALLS = [0]           # calls into functions of extensions loaded in this process (custom_kernel_calls)
EXT_UNCOUNTED = []        # extensions whose calls cannot be counted (torch.ops libraries)


def _counting(mod):
    """A stand-in for an extension module whose callables count their calls in EXT_CALLS; anything else is the
    module's own attribute. Idempotent (one proxy per module), so nested loaders never count twice."""
    if not isinstance(mod, types.ModuleType):             # is_python_module=False: a .so path, torch.ops calls
        EXT_UNCOUNTED.append(str(mod))
        return mod
    if getattr(mod, "__cudal1_counting__", False):
        return mod
    proxy = types.ModuleType(mod.__name__, getattr(mod, "__doc__", None))
    for k, v in vars(mod).items():
        if callable(v) and not isinstance(v, type) and not k.startswith("__"):
            def counted(*a, __f=v, **kw):
                EXT_CALLS[0] += 1
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


def install_build_cache():
    """Every load_inline and load in this process, whenever called and however imported (`from
    torch.utils.cpp_extension import load_inline` binds it at import), goes through the build cache; calls into
    extensions are counted."""
    cpp_extension.load_inline = _counting_loader(cached_load_inline)
    cpp_extension.load = _counting_loader(cached_load)
