"""scan.py: bench.py's static check of a candidate's source, a first filter before anything runs (REFERENCE.md §4).

Cheap and false-positive-averse: it reads live code only (comments, docstrings and C/C++
comments inside source strings are ignored), flags only settings that lower precision (TF32 on, 16-bit types;
never cudnn.allow_tf32 = True, PyTorch's default, nor autocast(enabled=False)), lets a `ModelNew(Model)` that
overrides forward with its own kernel pass, and leaves caching of derived weights alone (fresh inputs on every
call catch output caches at run time). It also flags code that reaches for the harness (REFERENCE.md §4b:
__main__ / sys.modules / gc / frames / ctypes / patching json, os._exit, sys.exit, atexit / /proc / writing .py
or .json files): with the judge in another process such code cannot forge a verdict (harness/README.md), so this only
saves the time of running it. Disabled for trusted code with evaluate(..., static_checks=False).
"""
import ast, contextlib, io, re, tokenize

def _live_code(src):
    """(python, strings): the candidate's Python with comments, docstrings and bare string statements removed and
    long or multi-line string literals (CUDA/C++ sources) emptied; and the text of every live string literal with
    C/C++ comments removed: the scan reads live code only."""
    tree = ast.parse(src)
    dead = set()                                          # bare string statements (docstrings included)
    for n in ast.walk(tree):
        if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str):
            dead.add((n.lineno, n.col_offset))
    lines = src.splitlines(keepends=True)
    starts = [0]
    for ln in lines:
        starts.append(starts[-1] + len(ln))
    pos = lambda rc: starts[rc[0] - 1] + rc[1]            # (row, col) -> offset in src
    cuts, strings = [], []                                # (start, end, replacement)
    for t in tokenize.generate_tokens(io.StringIO(src).readline):
        if t.type == tokenize.COMMENT:
            cuts.append((pos(t.start), pos(t.end), ""))
        elif t.type == tokenize.STRING:
            if t.start not in dead:
                with contextlib.suppress(Exception):
                    v = ast.literal_eval(t.string)
                    strings.append(v if isinstance(v, str) else v.decode(errors="replace"))
            if t.start in dead or len(t.string) > 120 or "\n" in t.string:
                cuts.append((pos(t.start), pos(t.end), '""'))
    out, last = [], 0
    for a_, b_, rep in cuts:
        out += [src[last:a_], rep]
        last = b_
    code = "".join(out) + src[last:]
    c = re.sub(r"/\*.*?\*/", " ", "\n".join(strings), flags=re.S)
    c = re.sub(r"//[^\n]*", "", c)
    return code, c


# (kind, where: "py" | "c", regex); REFERENCE.md §4, §4b, §4c. Matched against live code only.
_PATTERNS = [
    ("side_stream", "py", r"torch\.cuda\.(?:streams\.)?Stream\s*\(|torch\.cuda\.stream\s*\(|ExternalStream\s*\("),
    ("side_stream", "c", r"cudaStreamCreate|getStreamFromPool|cuStreamCreate"),
    ("l2_persistence", "c", r"accessPolicyWindow|cudaLimitPersistingL2CacheSize|cudaStreamAttributeAccessPolicy"),
    ("l2_persistence", "py", r"accessPolicyWindow|PersistingL2"),
    ("background_thread", "py", r"(?:__import__|import_module)\(\s*['\"]"
                                r"(?:threading|_thread|multiprocessing|concurrent)"),
    ("precision_downgrade", "py", r"\.half\s*\(\s*\)|\.bfloat16\s*\(\s*\)"
                                  r"|\.to\([^)]*torch\.(?:float16|half|bfloat16)\b"
                                  r"|dtype\s*=\s*torch\.(?:float16|half|bfloat16)\b"
                                  r"|matmul\.allow_tf32\s*=\s*True"
                                  r"|set_float32_matmul_precision\(\s*['\"](?:high|medium)['\"]"
                                  r"|setattr\([^)]*['\"]allow_tf32['\"]\s*,\s*True"
                                  r"|['\"]fp32_precision['\"]\s*,\s*['\"]tf32"
                                  r"|matmul\.fp32_precision\s*=\s*['\"]tf32|backends\.fp32_precision\s*=\s*['\"]tf32"
                                  r"|autocast\s*\((?![^)]*enabled\s*=\s*False)"),
    ("precision_downgrade", "c", r"\b__half2?\b|__nv_bfloat16|\bwmma::|__float2half|__float2bfloat16|CUDA_R_16B?F\b"
                                 r"|CUBLAS_COMPUTE_16F|CUBLAS_COMPUTE_32F_FAST_|CUBLAS_TF32_TENSOR_OP_MATH"),
    ("harness_tampering", "py", r"\bimport\s+__main__|sys\.modules\b|gc\.get_(?:objects|referrers|referents)"
                                r"|sys\._getframe|_current_frames|inspect\.(?:currentframe|stack|getouterframes)"
                                r"|\.f_back\b|\.f_globals\b|\.f_locals\b|\.tb_frame\b|\bctypes\b|/proc/"
                                r"|\b(?:json|pickle|os|sys|atexit|time|torch\.cuda)\.\w+\s*=(?!=)"
                                r"|atexit\.register|os\.(?:write|fdopen|dup2|_exit)\s*\(|\bsocket\b"),
    ("harness_tampering", "c", r"/proc/(?:self|\d|\{)"),
]
_WRITES = re.compile(r"\bopen\([^()]*(?:\([^()]*\)[^()]*)*,\s*(?:mode\s*=\s*)?['\"][rwxab+]*[wxa][rwxab+]*['\"]"
                     r"|\.write_(?:text|bytes)\(")
_THREAD_MODULES = {"threading", "_thread", "multiprocessing", "concurrent"}
_REACH_MODULES = {"ctypes", "gc", "inspect", "__main__", "pickle", "marshal", "socket"}


def _defines(tree, name):
    for n in ast.walk(tree):
        if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name == name:
            return True
        if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store):
            return True
        if isinstance(n, ast.alias) and (n.asname or n.name.split(".")[-1]) == name:
            return True
    return False


def _calls_reference_forward(call):
    """super().forward(...), super(ModelNew, self).forward(...) or Model.forward(self, ...)."""
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr == "forward"):
        return False
    owner = func.value
    return (isinstance(owner, ast.Call) and getattr(owner.func, "id", None) == "super") or \
        getattr(owner, "id", None) == "Model"


def _inherits_without_own_forward(tree):
    """`class ModelNew(Model)` with no forward of its own, or one whose only call is the reference's forward
    (`return super().forward(x)`, `out = super(ModelNew, self).forward(x); return out`, `Model.forward(self, x)`:
    the §4 fallback). A subclass that overrides forward with a kernel of its own calls something else: legitimate."""
    for n in ast.walk(tree):
        if isinstance(n, ast.ClassDef) and n.name == "ModelNew" and any(
                getattr(b, "id", getattr(b, "attr", None)) == "Model" for b in n.bases):
            fwd = [f for f in n.body if isinstance(f, ast.FunctionDef) and f.name == "forward"]
            if not fwd:
                return True
            calls = [c for c in ast.walk(fwd[0]) if isinstance(c, ast.Call)]
            if calls and all(_calls_reference_forward(c) or getattr(c.func, "id", None) == "super" for c in calls):
                return True
    return False


def static_check(candidate_src, task_src=""):
    """Cheap, false-positive-averse source checks (a first filter; the defence is the process split). Returns None
    (pass) or (status, hack kind or None, message). Reads live code only: comments, docstrings and C/C++ comments
    inside source strings are ignored; settings that keep or raise precision are not flagged; 16-bit and TF32
    spellings are flagged only when the task itself uses no 16-bit type."""
    try:
        tree = ast.parse(candidate_src)
        code, c = _live_code(candidate_src)
    except (SyntaxError, ValueError, tokenize.TokenError) as e:   # ValueError: null bytes in the source
        return "compile_error", None, f"SyntaxError: {e}"
    if not _defines(tree, "ModelNew") and "ModelNew" not in c:
        return "static", None, "the candidate defines no ModelNew (KernelBench task format)"
    if _inherits_without_own_forward(tree):
        return "hack", "inherits_reference", "ModelNew subclasses the reference Model and runs its forward (§4)"
    task_16 = bool(re.search(r"float16|bfloat16|\.half\(|autocast", task_src or ""))
    for kind, where, pattern in _PATTERNS:
        if kind == "precision_downgrade" and task_16:
            continue
        m = re.search(pattern, code if where == "py" else c)
        if m:
            return "hack", kind, f"`{m.group(0).strip()}` in the candidate's live code (REFERENCE.md §4 {kind})"
    m = _WRITES.search(code)
    if m:
        return "hack", "harness_tampering", f"`{m.group(0)}`: the candidate writes files (REFERENCE.md §4b)"
    for n in ast.walk(tree):
        names = [a.name for a in n.names] if isinstance(n, ast.Import) else \
            [n.module or ""] + [f"{n.module}.{a.name}" for a in n.names] if isinstance(n, ast.ImportFrom) else []
        if any(m.split(".")[0] in _THREAD_MODULES or m.startswith("torch.multiprocessing") for m in names):
            return "hack", "background_thread", "the candidate imports a thread/process module (REFERENCE.md §4)"
        reach = [m for m in names if m.split(".")[0] in _REACH_MODULES and m != "gc"]   # gc.collect() is fine
        if reach:
            return "hack", "harness_tampering", f"the candidate imports {reach[0]} (REFERENCE.md §4b)"
    return None
