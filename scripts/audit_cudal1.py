"""Every line of a CUDA-L1 release explained: verdict, speedup next to the published one, root cause.

    python evaluate.py --kernels=../shared/cudal1_release/a100.json --baselines=eager \
        --eval_dir=results/cudal1_a100_audit
    python scripts/audit_cudal1.py --eval_dir=results/cudal1_a100_audit --kernels=../shared/cudal1_release/a100.json
    python scripts/audit_cudal1.py --eval_dir=out/new_audit --compare=results/cudal1_a100_audit/audit.csv  # changes.md

Reads evaluate.py's results.jsonl in eval_dir (the rows of method `method`, "kernels" for a --kernels run; the last
row of a task wins, as in evaluate.read_results; rows are matched to release lines by level and KernelBench id, so
"level1/1" and "level1/1_Square_matrix_multiplication_" both match) and the release file (REFERENCE.md §1.6: one
JSON object per line, custom_code null or "None" where there is no kernel). Writes eval_dir/audit.csv and audit.md
(counts by verdict and by cause, then one row per release line: verdict, our speedup (x), the published
score_default (x), their ratio for accepted kernels, cause and its evidence) and prints a one-line summary.

Each line gets exactly one cause from a fixed list (CATEGORIES; the mechanism names are MECHANISMS):
  accepted                    bench's status ok; notes whether a custom kernel ran (custom_kernel_calls > 0, or 0 =
                              a PyTorch-only rewrite) and whether the task is degenerate (REFERENCE.md §3);
  no kernel in the release    custom_code null / "None";
  not measured                no row for the task (a run cut short), or a row that is not this line's kernel;
  defect                      a genuine defect exposed by a stricter check, its mechanism named from the record and
                              the source: a build failure with its first compiler error, wrong output on fresh
                              inputs, NaN (uninitialised memory: bench poisons free memory with NaN before a trial),
                              wrong only in timed calls (a CUDA graph, a data_ptr()/id() keyed cache...), a crash, a
                              hang, the wrong output shape...;
  policy                      rejected by design, with the source line that triggers it (the static scan's match;
                              the line setting the backend flag; for a measured precision downgrade the error vs
                              float64 against its threshold and the line that converts to 16 bits / TF32);
  evaluator false negative?   what these rules cannot explain (clock_mismatch, impossible_time, a downgrade with no
                              16-bit or TF32 code, a rejection with no sign of what it names...): the lines to inspect.
A task with several release lines (samples) has one results.jsonl row, for the sample evaluate.py picked (matched by
bench's candidate_hash); the other lines get their cause from the row's sample_status / sample_hacks alone.
Errors (one line, exit status 1): a missing eval_dir/results.jsonl or release file, a release line without
level_id / task_id.
"""
import ast
import collections
import csv
import hashlib
import io
import json
import math
import os
import re
import statistics
import sys
import tokenize

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, _ROOT)
import common  # noqa: E402
from harness import scan  # noqa: E402
from evaluation.taskset import level_of, read_kernels, task_id_of  # noqa: E402

# -----------------------------------------------------------------------------
# config: --key=value overrides any of these (common.configure)
eval_dir = "results/cudal1_a100_audit"          # evaluate.py's eval_dir: results.jsonl in, audit.csv/audit.md out
kernels = "../shared/cudal1_release/a100.json"  # the release file evaluate.py ran on (CUDA-L1 format)
method = "kernels"                              # evaluate.py's method name of the kernels' rows (its main_method)
compare = ""                                    # an earlier audit.csv: the lines whose verdict or cause changed
# -----------------------------------------------------------------------------

CATEGORIES = ("accepted", "no kernel in the release", "not measured", "defect", "policy", "evaluator false negative?")
_FALSE_NEG = "evaluator false negative?"
MECHANISMS = {   # category -> the mechanisms it may name (a fixed list: a test checks that every cause is one)
    "accepted": ("custom kernel ran", "PyTorch-only rewrite", "kernel calls not counted",
                 "its extension never ran (a fallback bench did not yet name)"),
    "no kernel in the release": ("custom_code null or None",),
    "not measured": ("no row in results.jsonl", "the row is another kernel's"),
    "defect": ("does not parse", "does not build", "build fails, its try/except runs PyTorch", "no ModelNew",
               "wrong output on fresh inputs", "NaN in the output (uninitialised memory)",
               "wrong only in timed calls: stale CUDA-graph pointers",
               "wrong only in timed calls: data_ptr-keyed cache",
               "wrong only in timed calls: id-keyed cache", "wrong only in timed calls: cached result",
               "wrong only in timed calls: reused output buffer", "output written after return (asynchronous work)",
               "output shape mismatch", "output dtype mismatch", "output structure mismatch",
               "illegal memory access", "out of GPU memory", "torch API missing", "raises at run time",
               "computes something else, within the tolerance (float64 check)",
               "process crashed", "host memory over limit", "timeout / hang"),
    "policy": ("static: precision_downgrade", "static: side_stream", "static: harness_tampering",
               "static: l2_persistence", "static: background_thread", "inherits_reference", "backend_flags",
               "precision_downgrade (measured)", "16-bit output dtype", "output_aliases_input", "input_mutation",
               "lazy_output", "patched_timer_or_checker", "static: writes files (builds outside load_inline)",
               "static: writes files outside its own folders"),
    _FALSE_NEG: ("clock_mismatch", "output_changed_after_return", "harness_tampering (run time)", "impossible_time",
                "precision_downgrade with no 16-bit/TF32 code", "backend_flags with no flag line",
                "timed_output_mismatch with no caching code",
                "lazy_output with no tensor subclass", "patched_timer_or_checker with no patch",
                "build did not finish in time", "reference failed in the judge", "evaluator error",
                "output not delivered", "ok without a speedup", "unexplained verdict"),
}
# where to look for the line behind a verdict (regexes over live code: comments and docstrings blanked)
_PRECISION_LINE = (r"\.half\s*\(|\.bfloat16\s*\(|float16|bfloat16|HalfTensor|BFloat16Tensor|torch\.half\b|__half|half2"
                  r"|__nv_bfloat16|\bwmma\b|\bmma\b|tf32|TF32|fp32_precision|set_float32_matmul_precision|autocast"
                  r"|CUDA_R_16|COMPUTE_16F|_FAST_16|__float2half|__float2bfloat16")
_FAST_MATH_LINE = r"use_fast_math|ftz=true|prec-div=false|__expf|__logf|__sinf|__cosf|__powf|__fdividef|__frcp_"
FLAG_LINE = dict(cudnn_benchmark=r"cudnn\.benchmark|['\"]benchmark['\"]",
                 matmul_allow_tf32=r"matmul\.allow_tf32|fp32_precision|set_float32_matmul_precision|['\"]allow_tf32",
                 cudnn_allow_tf32=r"cudnn\.allow_tf32|fp32_precision|['\"]allow_tf32",
                 cudnn_deterministic=r"cudnn\.deterministic|use_deterministic_algorithms",
                 float32_matmul_precision=r"set_float32_matmul_precision|fp32_precision|matmul\.allow_tf32")
TIMED_CAUSES = [  # wrong only in timed calls: what in the source explains it, in this order (REFERENCE.md §4, §4b)
    ("stale CUDA-graph pointers", r"CUDAGraph|torch\.cuda\.graph\b|\.replay\s*\(|cudaGraph|make_graphed_callables"
                                  r"|cudaStreamBeginCapture"),
    ("data_ptr-keyed cache", r"data_ptr\s*\(\s*\)"),
    ("id-keyed cache", r"\bid\s*\(\s*\w+\s*\)"),
    ("cached result", r"cache|_cached\b|lru_cache|\bmemo"),
    ("reused output buffer", r"self\.\w*(?:out|buf|result)\w*\s*=\s*torch\.(?:empty|zeros)"),
]
_ASYNC_LINE = r"non_blocking\s*=\s*True|torch\.cuda\.Stream|cudaStreamCreate|threading|record_stream"
_SUBCLASS_LINE = r"_make_subclass|__torch_function__|__torch_dispatch__|as_subclass|class\s+\w+\s*\(\s*torch\.Tensor"
_PATCH_LINE = (r"(?:torch\.cuda\.(?:Event|synchronize|Event\.elapsed_time)|time\.\w+|torch\.allclose"
               r"|torch\.testing\.\w+)\s*=(?!=)")
_MUTATION_LINE = r"\b\w+\.(?:\w+_)\s*\((?!\s*\))|\bout\s*=\s*\w+|\[\s*:\s*\]\s*=|\.copy_\s*\("
HAND_NOTES = {   # bench's candidate_hash -> what reading the kernel by hand found
    "dadecb54f4c205e8": "CUDA-L1 A100 level3/46: it normalises with BatchNorm's running statistics (eval mode) where "
                        "the reference, in training mode, uses the batch's own",
    "6da815fac8fea75a": "CUDA-L1 A100 level3/49: its load_inline build fails (functions= names mamba_final_state, "
                        "which only its cuda_sources define, beside a PYBIND11_MODULE of its own), so forward_pytorch "
                        "runs; 1 of 131072 outputs (~5e7 after exp(cumsum)) once missed rtol by 0.0012 "
                        "against the fp32 reference, whose own rounding is that large there: an evaluator false "
                        "negative, fixed in the judge (mismatches_vs64, tests/test_reference_rounding.py); measured "
                        "again after the fix: correct, and the fallback it is",
    "f3bd4bcc040c7f31": "CUDA-L1 A100 level1/86: its output is channels_last (16x64x254x254, 264 MB); formerly "
                        "the runner's .contiguous() copy of it for the judge fell inside the parent's wall window, "
                        "which the reference's contiguous output never pays (clock_mismatch): an evaluator false "
                        "negative, fixed in the runner (dense outputs delivered as stored, "
                        "tests/test_exchange_layout.py); measured again after the fix: accepted",
    "1a828a6981438366": "CUDA-L1 A100 level1/84: builds only if torch.cuda.is_available(); the build fails with "
                        "main.cpp:28:1: error: redefinition of PyInit_... (its cpp_sources has a PYBIND11_MODULE "
                        "and functions= makes another; reproduced by scripts/cudal1_builds_cpu.py, builds_cpu.txt). "
                        "The record predates records that keep a fallback's compiler error beside a later mismatch",
    "ab7b121921886d80": "CUDA-L1 A100 level3/45: its build fails in cuda.cu: no suitable conversion function from "
                        "at::DeprecatedTypeProperties to c10::ScalarType (AT_DISPATCH on the long-deprecated "
                        "x.type(): a torch-version incompatibility; reproduced by scripts/cudal1_builds_cpu.py, "
                        "builds_cpu.txt); it asks for verbose=True, so the record had no compiler error",
}
OTHER_MATH = 4.0   # a measured downgrade with err above this many times half_err and no 16-bit code: other math
SOURCE_FILE = re.compile(r"\.(?:cu|cuh|cpp|cc|cxx|c|h|hpp)['\"]")   # a file write of a build source
WRITE_CALL = r"\bopen\(|\.write_(?:text|bytes)\(|\bshutil\.\w+\(|\bos\.(?:open|rename|replace)\("   # a file write


def _hash(src):
    """bench's candidate_hash of a source (harness.record.source_hash)."""
    return hashlib.sha256((src or "").encode()).hexdigest()[:16]


def good(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def first_line(text, n=240):
    """The first non-empty line of an error, cut to n characters."""
    lines = [s.strip() for s in str(text or "").splitlines() if s.strip()]
    return (lines[0] if lines else "")[:n]


def first_compiler_error(text):
    """The first compiler/linker error line of a bench error (buildcache.first_error keeps it and its context)."""
    text = re.sub(r"^(?:\w+Error:\s*)?(?:Error building extension '[^']*':\s*)?", "", str(text or "").strip())
    for ln in text.splitlines():
        if re.search(r"\berror\b\s*[:(]|undefined reference|undefined symbol|fatal error", ln, re.I):
            return ln.strip()[:240]
    return first_line(text)


# ---------------------------------------------------------------------------------------- finding the line

def _masks(src):
    """(py, c): copies of src with the same lines and columns. py: Python code with comments, docstrings and long or
    multi-line string literals (CUDA/C++ sources) blanked, as scan.py reads it; c: only the live string literals, with
    C/C++ comments blanked. A source that does not parse is returned as it is, twice."""
    try:
        tree = ast.parse(src)
        toks = list(tokenize.generate_tokens(io.StringIO(src).readline))
    except (SyntaxError, ValueError, tokenize.TokenError, RecursionError):
        return src, src
    dead = {(n.lineno, n.col_offset) for n in ast.walk(tree) if isinstance(n, ast.Expr)
            and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)}
    starts = [0]
    for ln in src.split("\n"):                            # tokenize's lines end at "\n" only
        starts.append(starts[-1] + len(ln) + 1)
    pos = lambda rc: starts[rc[0] - 1] + rc[1]
    blank = lambda s: re.sub(r"[^\n]", " ", s)
    py, c = list(src), list(blank(src))
    for t in toks:
        a, b = pos(t.start), pos(t.end)
        if t.type == tokenize.COMMENT or (t.type == tokenize.STRING and t.start in dead):
            py[a:b] = blank(src[a:b])
        elif t.type == tokenize.STRING:
            c[a:b] = src[a:b]
            if len(t.string) > 120 or "\n" in t.string:
                py[a:b] = blank(src[a:b])
    c = re.sub(r"/\*.*?\*/|//[^\n]*", lambda m: blank(m.group(0)), "".join(c), flags=re.S)
    return "".join(py), c


def find_line(src, pattern, where=("py", "c"), literal=False):
    """'line N: `text`' for the first live line of src matching pattern (a regex, or literal text), looking in the
    Python code first, then in the CUDA/C++ strings (where); None if no live line matches."""
    if not src:
        return None
    masks = dict(zip(("py", "c"), _masks(src)))
    rx = re.compile(re.escape(pattern) if literal else pattern)
    for w in where:
        m = rx.search(masks[w])
        if m:
            n = src.count("\n", 0, m.start())
            text = src.split("\n")[n].strip()
            return f"line {n + 1}: `{text[:160]}{'...' if len(text) > 160 else ''}`"
    return None


def static_line(src, err, kind):
    """The source line behind a static-scan rejection: the scan's own match (quoted in bench's error) found in the
    live code, else the first live line its pattern for that kind matches."""
    m = re.search(r"`(.+?)`(?: in the candidate's live code|: the candidate writes files)", err or "", re.S)
    if m:
        hit = find_line(src, m.group(1), literal=True) or find_line(src, m.group(1).splitlines()[0], literal=True)
        if hit:
            return hit
    if "writes files" in (err or ""):
        return find_line(src, WRITE_CALL, ("py",))
    m = re.search(r"imports (\S+)", err or "")
    if m or kind == "background_thread":
        mods = re.escape(m.group(1).split(".")[0]) if m else "threading|_thread|multiprocessing|concurrent"
        return find_line(src, rf"^\s*(?:import|from)\s+(?:{mods})\b|__import__\(\s*['\"](?:{mods})", ("py",))
    for k, where, pattern in scan._PATTERNS:
        if k == kind:
            hit = find_line(src, pattern, (where,))
            if hit:
                return hit
    return None


# -------------------------------------------------------------------------------------------- classification

def classify(rec, code):
    """(category, mechanism, detail) of one bench record (an evaluate.py results.jsonl row) for the kernel `code`.
    detail is the evidence: the quoted line, the first compiler error, the numbers measured."""
    st, hack, err = rec.get("status"), rec.get("hack"), str(rec.get("error") or "")
    et = str(rec.get("error_type") or "")
    env = f"torch {rec.get('torch_version') or '?'} / CUDA {rec.get('cuda_version') or '?'}"
    if st == "ok" and rec.get("sample_only"):               # a correct sample slower than the one reported
        return "accepted", "kernel calls not counted", "correct, slower than the sample evaluate.py reported"
    if st == "ok":
        if not rec.get("success", True) or not good(rec.get("speedup")):
            return _FALSE_NEG, "ok without a speedup", f"status ok but speedup {rec.get('speedup')!r}"
        calls = rec.get("custom_kernel_calls")
        mech = "kernel calls not counted" if calls is None else "custom kernel ran" if calls > 0 \
            else "PyTorch-only rewrite"
        if calls == 0 and re.search(r"\bload_inline\s*\(", code or "") and not rec.get("fallback_checked_in_models"):
            # a record without fallback_checked_in_models comes from a bench that did not look for a build that
            # failed in ModelNew() and was caught there, so it reads as a PyTorch-only rewrite; bench now names such
            # a build `fallback`
            return "accepted", "its extension never ran (a fallback bench did not yet name)", \
                "its source builds a load_inline extension, yet no call reached one in the first trial: its " \
                "build most likely failed in ModelNew() and its try/except ran PyTorch; re-measure to confirm"
        detail = f"{calls} call{'s' * (calls != 1)} into its extensions in the first trial" if calls else \
            "no call into a load_inline extension in the first trial" if calls == 0 else "extension calls uncountable"
        return "accepted", mech, detail
    if st == "compile_error":
        if et == "SyntaxError" or err.startswith("SyntaxError"):
            return "defect", "does not parse", first_line(err)
        return "defect", "does not build", f"does not build with {env} (first error: {first_compiler_error(err)})"
    if st == "static":
        if "no ModelNew" in err:
            return "defect", "no ModelNew", first_line(err)
        return _FALSE_NEG, "unexplained verdict", f"static: {first_line(err)}"
    if st == "timeout":
        if "import" in err or not rec.get("compiled"):
            return _FALSE_NEG, "build did not finish in time", first_line(err)
        return "defect", "timeout / hang", first_line(err)
    if st == "incorrect":
        return _incorrect(rec, code, err)
    if st in ("runtime_error", "crash"):
        return _runtime(rec, err, et, env)
    if st == "hack":
        return _hack(rec, code, hack, err, et, env)
    return _FALSE_NEG, "unexplained verdict", f"status {st!r}, hack {hack!r}: {first_line(err)}"


def _incorrect(rec, code, err):
    m = re.search(r"has dtype (\w+), expected (\w+)", err)
    if m:
        if m.group(1) in ("float16", "bfloat16") and m.group(2) in ("float32", "float64"):
            line = find_line(code, _PRECISION_LINE)
            return "policy", "16-bit output dtype", f"output {m.group(1)}, reference {m.group(2)}" + \
                (f"; {line}" if line else "")
        return "defect", "output dtype mismatch", first_line(err)
    if "has shape" in err:
        return "defect", "output shape mismatch", first_line(err)
    if re.search(r"parts, expected|expected a \w+|is not a number", err):
        return "defect", "output structure mismatch", first_line(err)
    if "could not be delivered" in err:
        return _FALSE_NEG, "output not delivered", first_line(err)
    nums = f"{rec.get('mismatches')} mismatches, max_abs_err {rec.get('max_abs_err')}"
    if rec.get("nans"):
        line = find_line(code, r"torch\.empty(?:_like)?\s*\(|\bempty_like\b|at::empty|torch::empty", ("c", "py"))
        return "defect", "NaN in the output (uninitialised memory)", \
            f"{rec['nans']} NaN of {nums} (free memory is poisoned with NaN before each trial)" + \
            (f"; output allocated uninitialised at {line}" if line else "")
    return "defect", "wrong output on fresh inputs", "; ".join(
        x for x in (nums if rec.get("mismatches") is not None else "", first_line(err, 160)) if x)


def _runtime(rec, err, et, env):
    low = err.lower()
    if et == "TaskError" or "reference (task) failed" in err:
        return _FALSE_NEG, "reference failed in the judge", first_line(err)
    if err.startswith("evaluator error") or et in ("JudgeError", "Exchange"):
        return _FALSE_NEG, "evaluator error", first_line(err)
    if "illegal memory access" in low or "misaligned address" in low or "out of bounds" in low:
        return "defect", "illegal memory access", first_line(err)
    if "OutOfMemory" in et or "out of memory" in low:
        return "defect", "out of GPU memory", first_line(err)
    if et == "MemoryLimit":
        return "defect", "host memory over limit", first_line(err)
    if "defines no ModelNew" in err:
        return "defect", "no ModelNew", first_line(err)
    if re.search(r"module 'torch[\w.]*' has no attribute|cannot import name .* from 'torch", err):
        return "defect", "torch API missing", f"with {env}: {first_line(err)}"
    if rec.get("status") == "crash":
        return "defect", "process crashed", f"{et}: {first_line(err)}"
    return "defect", "raises at run time", f"{et}: {first_line(err)}" if et and not err.startswith(et) \
        else first_line(err)


def _hack(rec, code, hack, err, et, env):
    if et == "StaticCheck":                                # the scan's verdict, before anything ran
        if hack == "inherits_reference":
            return "policy", "inherits_reference", find_line(code, r"class\s+ModelNew\s*\(", ("py",)) or first_line(err)
        line = static_line(code, err, hack)
        if hack == "harness_tampering" and "the candidate writes files: " in err:   # the scan's reason follows
            why = err.split("the candidate writes files: ", 1)[1].rsplit(" (REFERENCE", 1)[0]
            return "policy", "static: writes files outside its own folders", f"{why}: {line or first_line(err)}"
        if hack == "harness_tampering" and "writes files" in err and SOURCE_FILE.search(err + (line or "")):
            # a row of a scan that named every file write: no sign of tampering, a C++/CUDA source written to be
            # built with cpp_extension.load (the scan now lets a write into the runner's own folders pass)
            return "policy", "static: writes files (builds outside load_inline)", \
                f"writes a C++/CUDA source to build it: {line or first_line(err)}"
        mech = f"static: {hack}"
        if mech not in MECHANISMS["policy"]:
            return _FALSE_NEG, "unexplained verdict", f"static {hack}: {first_line(err)}"
        return "policy", mech, line or f"(line not found) {first_line(err)}"
    also = hack != "fallback" and "; also: hack: " in err and "fell back: " in err
    if hack == "fallback" or also:  # (also: a hack that stopped it after the fallback: bench names that one first)
        m = re.search(r"fell back: (.*)", err, re.S)
        first = first_compiler_error(m.group(1)) if m else "not in the record"
        return "defect", "build fails, its try/except runs PyTorch", \
            f"its load_inline does not build with {env}, so its try/except runs PyTorch (first error: {first})" + \
            ("" if m or not err else f"; then: {first_line(err, 160)}") + \
            (f"; then {hack}: {first_line(err.split('; also: hack: ')[0], 160)}" if also else "")
    if hack == "precision_downgrade":
        p = rec.get("precision") or {}
        if good(p.get("err")) and good(p.get("threshold")):
            meas = f"error vs float64 {p['err']:.3g} > threshold {p['threshold']:.3g} (fp32 reference " \
                   f"{p.get('ref_err') or 0:.3g}, 10-bit operands {p.get('half_err') or 0:.3g})"
        else:
            meas = first_line(err)
        line = find_line(code, _PRECISION_LINE) or find_line(code, _FAST_MATH_LINE)
        if line:
            return "policy", "precision_downgrade (measured)", f"{meas}; {line}"
        if good(p.get("err")) and good(p.get("half_err")) and p["err"] > OTHER_MATH * p["half_err"]:
            # far beyond what 16-bit operands cost this task, with no 16-bit code: not a precision but a result
            # that differs and still passes isclose (CUDA-L1 level3/46: BatchNorm's running statistics instead of
            # the batch's, error 0.0216 against 0.00032 for 10-bit operands)
            return "defect", "computes something else, within the tolerance (float64 check)", \
                f"{meas}: {p['err'] / p['half_err']:.0f}x the error of 10-bit operands, no 16-bit/TF32 code"
        return _FALSE_NEG, "precision_downgrade with no 16-bit/TF32 code", meas
    if hack == "backend_flags":
        m = re.search(r"\bto (\{[^{}]*\})", err)
        try:
            now = ast.literal_eval(m.group(1)) if m else {}
        except (ValueError, SyntaxError):
            now = {}
        base = rec.get("backend_flags") or {}
        changed = {k: (base.get(k), v) for k, v in now.items() if base.get(k) != v} if base else {}
        pats = [FLAG_LINE[k] for k in changed if k in FLAG_LINE] or list(FLAG_LINE.values())
        line = find_line(code, "|".join(pats), ("py",))
        what = ", ".join(f"{k} {a} -> {b}" for k, (a, b) in changed.items()) or first_line(err, 160)
        return ("policy", "backend_flags", f"{what}; {line}") if line else \
            (_FALSE_NEG, "backend_flags with no flag line", what)
    if hack == "timed_output_mismatch":
        for name, pattern in TIMED_CAUSES:
            line = find_line(code, pattern, ("py",))
            if line:
                return "defect", f"wrong only in timed calls: {name}", f"{line}; {first_line(err, 160)}"
        return _FALSE_NEG, "timed_output_mismatch with no caching code", first_line(err)
    if hack == "output_changed_after_return":
        line = find_line(code, _ASYNC_LINE)
        return ("defect", "output written after return (asynchronous work)", f"{line}; {first_line(err, 160)}") \
            if line else (_FALSE_NEG, "output_changed_after_return", first_line(err))
    if hack == "lazy_output":
        line = find_line(code, _SUBCLASS_LINE, ("py",))
        return ("policy", "lazy_output", line) if line else (_FALSE_NEG, "lazy_output with no tensor subclass",
                                                             first_line(err))
    if hack == "patched_timer_or_checker":
        line = find_line(code, _PATCH_LINE, ("py",))
        return ("policy", hack, line) if line else (_FALSE_NEG, "patched_timer_or_checker with no patch",
                                                    first_line(err))
    if hack in ("output_aliases_input", "input_mutation"):
        line = find_line(code, _MUTATION_LINE, ("py",)) if hack == "input_mutation" else None
        return "policy", hack, f"measured at run time: {first_line(err, 160)}" + (f"; {line}" if line else "")
    if hack == "harness_tampering":
        return _FALSE_NEG, "harness_tampering (run time)", first_line(err)
    if hack in ("clock_mismatch", "impossible_time"):
        c = rec.get("clock") or {}
        nums = f"cand_ms {rec.get('cand_ms')}, floor_ms {rec.get('floor_ms')}" if hack == "impossible_time" else \
            f"excess {c.get('excess_ms')} ms > limit {c.get('limit_ms')} ms (overhead {c.get('overhead_ms')} ms)"
        return _FALSE_NEG, hack, f"{nums}; {first_line(err, 160)}"
    return _FALSE_NEG, "unexplained verdict", f"hack {hack!r}: {first_line(err)}"


# ------------------------------------------------------------------------------------------------- the audit

def read_rows(path, method_):
    """{(level, task_id): row} of the method's rows in results.jsonl (the last row of a task wins, as in
    evaluate.read_results; unreadable lines are skipped), and {(level, task_id): screen row}. Read only."""
    rows, screens = {}, {}
    with open(path, errors="replace") as f:
        for line in f:
            try:
                r = json.loads(line)
                key = (level_of(r["task"]), task_id_of(r["task"]))
            except (json.JSONDecodeError, KeyError, TypeError):
                continue
            if r.get("method") == method_:
                rows[key] = r
            elif r.get("method") == "screen":
                screens[key] = r
    return rows, screens


def audit(release, rows, screens):
    """One dict per release line (read_kernels' rows, in order): the audit table."""
    by_task = collections.defaultdict(list)
    for i, k in enumerate(release):
        by_task[(k["level"], k["task_id"])].append(i)
    out = []
    for i, k in enumerate(release):
        key = (k["level"], k["task_id"])
        row, code = rows.get(key), k["code"]
        pub = (k.get("published") or {}).get("score_default")
        a = dict(line=i + 1, level=k["level"], task_id=k["task_id"], task=(row or {}).get("task") or k["task"],
                 status="", hack="", verdict="no row", speedup=None, published=pub if good(pub) else None,
                 ratio=None, rejected_speedup=None, custom_kernel_calls=None, degenerate="", candidate_hash="",
                 cause="", mechanism="", detail="")
        if row is not None:
            deg = row.get("degenerate")
            if deg is None and key in screens:
                deg = screens[key].get("passed")
            a["degenerate"] = ",".join(deg) if isinstance(deg, list) else "" if deg is None else str(deg)
        if code is None:
            cat, mech, detail = "no kernel in the release", "custom_code null or None", ""
            if row is not None:
                a.update(status=row.get("status") or "", verdict=row.get("status") or "")
        elif row is None:
            cat, mech, detail = "not measured", "no row in results.jsonl", "the run did not reach this task"
        else:
            rec = row
            siblings = [j for j in by_task[key] if release[j]["code"] is not None]
            if row.get("candidate_hash") != _hash(code):
                pos = by_task[key].index(i)
                ss, sh = row.get("sample_status") or [], row.get("sample_hacks") or []
                if len(siblings) > 1 and pos < len(ss) and any(row.get("candidate_hash") == _hash(release[j]["code"])
                                                              for j in siblings):
                    rec = dict(status=ss[pos], hack=sh[pos] if pos < len(sh) else None, sample_only=True,
                               torch_version=row.get("torch_version"), cuda_version=row.get("cuda_version"))
                else:
                    rec = None
            if rec is None:
                cat, mech, detail = "not measured", "the row is another kernel's", \
                    f"row candidate_hash {row.get('candidate_hash')}, this line's {_hash(code)}"
                a["verdict"] = "row of another kernel"
            else:
                cat, mech, detail = classify(rec, code)
                if _hash(code) in HAND_NOTES:       # read by hand where the record alone cannot say why
                    detail = f"{detail}; by hand: {HAND_NOTES[_hash(code)]}"
                if rec is not row:
                    detail = (detail + "; " if detail else "") + "not the sample evaluate.py reported: only its " \
                                                                 "status and hack are in results.jsonl"
                a.update(status=rec.get("status") or "", hack=rec.get("hack") or "",
                         verdict=(rec.get("status") or "") + (f" ({rec['hack']})" if rec.get("hack") else ""))
                if rec is row:
                    a.update(custom_kernel_calls=row.get("custom_kernel_calls"),
                             candidate_hash=row.get("candidate_hash") or "")
                    if cat == "accepted":
                        a["speedup"] = row["speedup"]
                        a["ratio"] = row["speedup"] / a["published"] if a["published"] else None
                    elif good(row.get("ref_ms")) and good(row.get("cand_ms")):
                        a["rejected_speedup"] = row["ref_ms"] / row["cand_ms"]
        if cat == "accepted" and a["degenerate"]:
            detail += f"; degenerate task: {a['degenerate']} passes its check (REFERENCE.md §3)"
        assert cat in MECHANISMS and mech in MECHANISMS[cat], f"cause outside the fixed list: {cat}: {mech}"
        a.update(cause=f"{cat}: {mech}", category=cat, mechanism=mech, detail=detail)
        out.append(a)
    return out


COLS = ["line", "level", "task_id", "task", "verdict", "status", "hack", "speedup", "published", "ratio",
        "rejected_speedup", "custom_kernel_calls", "degenerate", "category", "mechanism", "cause", "detail",
        "candidate_hash"]


def cell(text):
    """`text` as one markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def fmt(x, nd=2):
    return "" if x is None else f"{x:.{nd}f}" if isinstance(x, float) else str(x)


def markdown(table, meta):
    """audit.md: counts by verdict, by category and by cause, then one row per release line."""
    acc = [a["ratio"] for a in table if a["ratio"]]
    text = [f"# Audit of {meta['kernels']} ({len(table)} lines)\n",
            f"From `{meta['results']}` (method `{meta['method']}`); {meta['env']}. Speedups in x: ours = bench's "
            "t_ref / t_kernel on this GPU under its protocol, published = the release's score_default (A100, "
            "CUDA-L1's evaluator); ratio = ours / published for accepted kernels; rejected = t_ref / t_kernel of a "
            "rejected kernel that was timed (not a result).\n",
            f"Accepted {sum(a['category'] == 'accepted' for a in table)}; ratio ours/published over them: " +
            (f"median {statistics.median(acc):.2f}, min {min(acc):.2f}, max {max(acc):.2f}\n" if acc else "none\n")]
    for title, key in (("verdict (bench status and hack)", "verdict"), ("category", "category"), ("cause", "cause")):
        c = collections.Counter(a[key] for a in table)
        text += [f"\n## By {title}\n", "| " + key + " | lines |", "|---|---:|"]
        text += [f"| {cell(k or '-')} | {v} |" for k, v in sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))]
    text += ["\n## Per line\n", "| line | task | verdict | ours | published | ratio | cause | evidence |",
             "|---:|---|---|---:|---:|---:|---|---|"]
    for a in table:
        ours = fmt(a["speedup"]) or (f"({fmt(a['rejected_speedup'])} rejected)" if a["rejected_speedup"] else "-")
        text.append(f"| {a['line']} | {cell(a['task'])} | {cell(a['verdict'] or '-')} | {ours} | "
                    f"{fmt(a['published']) or '-'} | {fmt(a['ratio']) or '-'} | {cell(a['cause'])} | "
                    f"{cell(a['detail'][:300])} |")
    return "\n".join(text) + "\n"


def changes(table, earlier):
    """The lines of `table` (audit rows) whose verdict or cause differ from `earlier` (audit.csv rows of an earlier
    audit of the same release, by line number), as markdown table rows; a line missing from `earlier` counts too."""
    before = {int(a["line"]): a for a in earlier}
    out = []
    for a in table:
        b = before.get(a["line"], {})
        if (b.get("verdict"), b.get("cause")) != (a["verdict"], a["cause"]):
            out.append(f"| {a['line']} | {cell(a['task'])} | {cell(b.get('verdict') or '-')} -> "
                       f"{cell(a['verdict'] or '-')} | {cell(b.get('cause') or '-')} -> {cell(a['cause'])} | "
                       f"{cell(a['detail'][:200])} |")
    return out


def main():
    results = os.path.join(eval_dir, "results.jsonl")
    for path, what in ((results, "results.jsonl of evaluate.py (--eval_dir)"), (kernels, "release file (--kernels)")):
        if not os.path.isfile(path):
            sys.exit(f"error: no {what}: {path}")
    try:
        release = read_kernels(kernels)
    except (ValueError, KeyError, TypeError) as e:
        sys.exit(f"error: {kernels} is not a CUDA-L1 release file: {e}")
    if not all(isinstance(k["level"], int) and isinstance(k["task_id"], int) for k in release):
        sys.exit(f"error: {kernels}: every line needs level_id and task_id (CUDA-L1 release format)")
    rows, screens = read_rows(results, method)
    table = audit(release, rows, screens)
    keys = {(k["level"], k["task_id"]) for k in release}
    outside = sorted(r["task"] for key, r in rows.items() if key not in keys)
    envs = {(r.get("device_name"), r.get("torch_version"), r.get("cuda_version")) for r in rows.values()
            if r.get("device_name")}
    env = "; ".join(f"{d}, torch {t}, CUDA {c}" for d, t, c in sorted(envs, key=str)) or "no device recorded"
    with open(os.path.join(eval_dir, "audit.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, COLS, extrasaction="ignore")
        w.writeheader()
        w.writerows({k: fmt(v, 4) for k, v in a.items()} for a in table)
    with open(os.path.join(eval_dir, "audit.md"), "w") as f:
        f.write(markdown(table, dict(kernels=kernels, results=results, method=method, env=env)))
    if compare:
        if not os.path.isfile(compare):
            sys.exit(f"error: no earlier audit.csv (--compare): {compare}")
        with open(compare, newline="") as f:
            rows_changed = changes(table, list(csv.DictReader(f)))
        with open(os.path.join(eval_dir, "changes.md"), "w") as f:
            f.write(f"# Lines whose verdict or cause changed against {compare}\n\n| line | task | verdict | cause | "
                    "evidence now |\n|---:|---|---|---|---|\n" + "".join(r + "\n" for r in rows_changed))
        print(f"{len(rows_changed)} of {len(table)} lines changed verdict or cause against {compare} -> "
              f"{os.path.join(eval_dir, 'changes.md')}")
    c = collections.Counter(a["category"] for a in table)
    print(f"audit of {len(table)} release lines: " + ", ".join(f"{k} {c[k]}" for k in CATEGORIES) +
          (f"; {len(outside)} {method} rows of tasks not in the release ignored" if outside else "") +
          f" -> {os.path.join(eval_dir, 'audit.csv')}, audit.md")


if __name__ == "__main__":
    common.configure(globals())
    main()
