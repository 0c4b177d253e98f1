"""scan.py: bench.py's static check of a candidate's source, a first filter before anything runs (REFERENCE.md §4).

Cheap and false-positive-averse: it reads live code only (comments, docstrings and C/C++
comments inside source strings are ignored), flags only settings that lower precision (TF32 on, 16-bit types;
never cudnn.allow_tf32 = True, PyTorch's default, nor autocast(enabled=False)), lets a `ModelNew(Model)` that
overrides forward with its own kernel pass, and leaves caching of derived weights alone (fresh inputs on every
call catch output caches at run time). It also flags code that reaches for the harness (REFERENCE.md §4b:
__main__ / sys.modules / gc / frames / ctypes on Python objects or raw memory / patching json, os._exit, sys.exit,
atexit / /proc / file writes outside the runner's own folders or of Python files): with the judge in another process
such code cannot forge a verdict (harness/README.md), so this only saves the time of running it. ctypes for the CUDA
driver API and a .cu written to a temp folder and built with cpp_extension.load are judged by what they do.
Disabled for trusted code with evaluate(..., static_checks=False).
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
                                r"(?:threading|_thread|multiprocessing|concurrent)"
                                r"|\b\w+\.(?:threading|_thread)\.\w"),   # or through a module: logging.threading
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
                                r"|\.f_back\b|\.f_globals\b|\.f_locals\b|\.tb_frame\b|/proc/"
                                r"|\b(?:json|pickle|os|sys|atexit|time|torch\.cuda)\.\w+\s*=(?!=)"
                                r"|atexit\.register|os\.(?:write|fdopen|dup2|_exit)\s*\(|\bsocket\b"),
    ("harness_tampering", "c", r"/proc/(?:self|\d|\{)"),
    # ctypes that reaches Python objects or raw memory (the interpreter's API, an address read or written, libc);
    # ctypes for the CUDA driver or runtime API (c_void_p, byref, CDLL of libcuda) is left to the run-time checks
    ("harness_tampering", "py", r"\bpythonapi\b|\bPyDLL\b|\bpy_object\b|\.from_address\s*\(|\b(?:memmove|memset"
                                r"|string_at|wstring_at)\s*\(|\bcast\s*\(\s*id\s*\(|getattr\(\s*ctypes\b"
                                r"|\b(?:CDLL|LoadLibrary|dlopen)\s*\(\s*(?:None\b|sys\.executable|['\"][^'\"]*(?:libc\b"
                                r"|libc\.|libpython|libdl))|find_library\(\s*['\"]c['\"]"),
]
_THREAD_MODULES = {"threading", "_thread", "multiprocessing", "concurrent"}
_REACH_MODULES = {"gc", "inspect", "__main__", "pickle", "marshal", "socket"}


# A runner's working folder, HOME and TMPDIR are one private folder (harness/README.md), so a file written to a temp
# folder (tempfile, $TMPDIR) or by a relative path is the runner's own: a kernel writing its .cu there to build it
# with cpp_extension.load is harmless. A write is named when the scan can place its path outside (an absolute path,
# a parent folder, the home folder, the interpreter's or a module's folders, sys.path), cannot place it at all, or
# when it writes Python a later import would run (.py, .pth, sitecustomize). The sandbox is what stops such writes.
_TEMP = re.compile(r"\btempfile\.|\b(?:mkdtemp|mkstemp|gettempdir|TemporaryDirectory|NamedTemporaryFile)\b"
                   r"|['\"](?:TMPDIR|TEMP|TMP)['\"]")
_OWN_CALL = re.compile(r"^(?:os\.getcwd|(?:pathlib\.)?Path\.cwd)\b")
_OUTSIDE = re.compile(r"\b(?:sys\.(?:path|prefix|exec_prefix|base_prefix|executable)|site\.|sysconfig\.|__path__"
                      r"|\w+\.__file__|expanduser|Path\.home|getpwuid|find_spec)|['\"](?:HOME|USERPROFILE)['\"]")
_PY_FILE = re.compile(r"\.(?:py|pyc|pth)$|sitecustomize|usercustomize")
_PATH_FUNCS = {"join", "abspath", "realpath", "normpath", "Path", "PurePath", "PosixPath", "fspath", "str"}


class _Places:
    """Where the paths of a module's file writes lead: "temp" | "own" | "unknown" | "outside: why", following
    names through their assignments, loops, `with ... as` and the arguments of calls to the module's own functions."""

    def __init__(self, tree, src):
        self.src, self.binds, self.seen, self.memo, self.cuts = src, {}, set(), {}, 0
        funcs = {f.name: f for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
        for n in ast.walk(tree):
            pairs = []
            if isinstance(n, ast.Assign):
                pairs = [(t, n.value) for t in n.targets]
            elif isinstance(n, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr)) and n.value is not None:
                pairs = [(n.target, n.value)]
            elif isinstance(n, (ast.For, ast.AsyncFor, ast.comprehension)):
                pairs = [(n.target, ast.Subscript(value=n.iter, slice=ast.Constant(0)))]   # an element of iter
            elif isinstance(n, ast.withitem) and n.optional_vars is not None:
                pairs = [(n.optional_vars, n.context_expr)]
            elif isinstance(n, ast.Call):
                name = getattr(n.func, "id", getattr(n.func, "attr", None))
                f = funcs.get(name)
                params = [a.arg for a in f.args.args] if f else []
                if params and params[0] in ("self", "cls") and isinstance(n.func, ast.Attribute):
                    params = params[1:]
                pairs = list(zip(map(lambda p: ast.Name(id=p), params), n.args)) + \
                    [(ast.Name(id=k.arg), k.value) for k in n.keywords if k.arg]
            for target, value in pairs:
                targets = target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]
                values = value.elts if isinstance(value, ast.Tuple) and len(value.elts) == len(targets) else \
                    [value] * len(targets)
                for t, v in zip(targets, values):       # self.d = ... binds ".d" (any object's attribute d)
                    key = t.id if isinstance(t, ast.Name) else "." + t.attr if isinstance(t, ast.Attribute) else None
                    if key:
                        self.binds.setdefault(key, []).append(v)

    def text(self, node):
        """node's source (ast.get_source_segment, with the source's line offsets computed once)."""
        if not hasattr(self, "starts"):                 # lines end as the parser ends them; columns are bytes
            self.raw = self.src.encode()
            self.starts = [0] + [m.end() for m in re.finditer(rb"\r\n|\r|\n", self.raw)]
        if getattr(node, "end_lineno", None) is None:
            return ast.unparse(node)
        a, b = self.starts[node.lineno - 1] + node.col_offset, self.starts[node.end_lineno - 1] + node.end_col_offset
        return self.raw[a:b].decode(errors="replace")

    def of(self, node):
        """{place} of an expression (ast node) giving a path."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            v = node.value
            if v.startswith("~"):
                return {"outside: the home folder"}
            if v.startswith("/") and v not in ("/dev/null", "/dev/stdout", "/dev/stderr"):
                return {f"outside: the absolute path {v[:60]!r}"}
            return {"outside: a parent folder"} if ".." in v.split("/") else {"own"}
        if isinstance(node, ast.Name) and node.id == "__file__":
            return {"own"}                               # the candidate's own file, in the runner's folder
        text = self.text(node)
        if _OUTSIDE.search(text):
            return {f"outside: `{_OUTSIDE.search(text).group(0)}`"}
        key = node.id if isinstance(node, ast.Name) else "." + node.attr if isinstance(node, ast.Attribute) else None
        if key in self.binds or isinstance(node, ast.Name):
            if key in self.memo or key not in self.binds:
                return self.memo.get(key, {"unknown"})
            if key in self.seen:                         # a cycle: its other bindings are being followed above
                self.cuts += 1
                return set()
            self.seen.add(key)
            cuts, out = self.cuts, set().union(*(self.of(v) for v in self.binds[key]))
            self.seen.discard(key)
            if cuts == self.cuts:                        # whole (no cycle cut short): kept, so each name is
                self.memo[key] = out                     # followed once, however often it is used
            return out
        if not isinstance(node, ast.Name) and _TEMP.search(text):
            return {"temp"}
        if isinstance(node, ast.Call):
            if _OWN_CALL.search(text):
                return {"own"}
            name = getattr(node.func, "id", getattr(node.func, "attr", None))
            if name in _PATH_FUNCS and node.args:    # join: a later absolute part replaces the ones before
                later = [p for a in node.args[1:] for p in self.of(a) if p.startswith("outside")]
                return set(later) or self.of(node.args[0])
            if name in ("glob", "iglob", "listdir", "scandir", "dirname", "with_suffix", "with_name") and node.args:
                return self.of(node.args[0])
            return self.of(node.func.value) if isinstance(node.func, ast.Attribute) and \
                name in ("format", "replace", "resolve", "absolute", "joinpath") else {"unknown"}
        if isinstance(node, ast.Subscript) and isinstance(node.value, (ast.Tuple, ast.List, ast.Set)):
            return set().union(*(self.of(e) for e in node.value.elts)) if node.value.elts else set()
        if isinstance(node, (ast.Subscript, ast.Attribute, ast.Starred)):  # an element, .name of a temp file
            return self.of(node.value)
        if isinstance(node, ast.BinOp):                  # a prefix decides: "a" + b, f"{d}/x", d / "x", "%s" % d
            return self.of(node.left) if not isinstance(node.op, ast.Mod) else self.of(node.right)
        if isinstance(node, ast.JoinedStr) and node.values:
            first = node.values[0]
            return self.of(first.value if isinstance(first, ast.FormattedValue) else first)
        if isinstance(node, ast.IfExp):
            return self.of(node.body) | self.of(node.orelse)
        return {"unknown"}

    def names(self, node, seen=None):
        """The string constants an expression's path is made of (its names followed), for the file's kind."""
        seen = set() if seen is None else seen
        out = [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
        for n in ast.walk(node):
            key = n.id if isinstance(n, ast.Name) else "." + n.attr if isinstance(n, ast.Attribute) else None
            if key in self.binds and key not in seen:
                seen.add(key)
                out += [c for v in self.binds[key] for c in self.names(v, seen)]
        return out


_MODULE_OPEN = {"io", "codecs", "gzip", "bz2", "lzma", "tarfile", "zipfile"}
_DEST_CALLS = {"copy", "copy2", "copyfile", "copytree", "move", "rename", "replace", "link", "symlink", "save"}


def _writes(call):
    """The path (ast node) `call` writes a file at (open with a writing mode, write_text/bytes, Path.open('w'),
    os.open with a writing flag, shutil/os copies and moves, torch.save; os.chdir, after which relative writes land
    there), else None."""
    func = call.func
    name = getattr(func, "id", getattr(func, "attr", None))
    owner = getattr(getattr(func, "value", None), "id", None)
    kw = {k.arg: k.value for k in call.keywords if k.arg}
    if name in ("write_text", "write_bytes") and isinstance(func, ast.Attribute):
        return func.value
    if name == "open" and owner == "os":
        flags = ast.unparse(call.args[1]) if len(call.args) > 1 else ast.unparse(kw.get("flags", ast.Constant(0)))
        return call.args[0] if call.args and re.search(r"O_(?:WRONLY|RDWR|CREAT|APPEND|TRUNC)", flags) else None
    if name == "open":
        receiver = isinstance(func, ast.Attribute) and owner not in _MODULE_OPEN     # Path(...).open(mode)
        args = call.args if not receiver else [func.value] + call.args
        mode = args[1] if len(args) > 1 else kw.get("mode")
        writing = mode is not None and not (isinstance(mode, ast.Constant) and isinstance(mode.value, str)
                                            and not re.search(r"[wxa+]", mode.value))
        return (args[0] if args else kw.get("file")) if writing else None
    if name == "chdir" and owner == "os" and call.args:
        return call.args[0]
    if name in _DEST_CALLS and owner in ("shutil", "os", "torch") and len(call.args) > 1:
        return call.args[1]
    return None


def _file_write(tree, src):
    """The first file write of the module the scan names, as (the call's source, why), or None."""
    places = None
    for n in ast.walk(tree):
        path = _writes(n) if isinstance(n, ast.Call) else None
        if path is None:
            continue
        places = places or _Places(tree, src)
        try:
            where, parts = places.of(path), places.names(path)
        except RecursionError:                           # a path built too deeply to follow: not placed
            where, parts, places.seen = {"unknown"}, [], set()
        kind = next((c for c in parts if _PY_FILE.search(c)), None)
        where |= {"outside: a parent folder"} if any(".." in c.split("/") for c in parts) else set()
        why = f"Python a later import would run ({kind!r})" if kind else \
            next((f"outside its own folders ({p[len('outside: '):]})" for p in sorted(where)
                  if p.startswith("outside")), None) or \
            ("at a path the scan cannot place" if "unknown" in where or not where else None)
        if why:
            return places.text(n).splitlines()[0][:160], why
    return None


def defines(tree, name):
    """Whether the module `tree` (ast) binds `name` anywhere: a class, a function, an assignment or an import."""
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


def task_problem(task_src):
    """Why the task file is not a KernelBench task (a line for the user), or None. Only what the CLI can see
    before anything runs: a task's own errors (an import that fails, say) come back in the record."""
    try:
        tree = ast.parse(task_src)
    except SyntaxError as e:
        return f"the task does not parse: {e.msg} (line {e.lineno})"
    missing = [n for n in ("Model", "get_inputs", "get_init_inputs") if not defines(tree, n)]
    if not missing:
        return None
    if defines(tree, "ModelNew"):
        return "this file defines ModelNew, so it looks like the candidate: are TASK and CANDIDATE swapped?"
    return f"a task defines Model, get_inputs and get_init_inputs; this one lacks {', '.join(missing)}"


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
    except RecursionError:                                 # nesting deeper than the parser's stack
        return "compile_error", None, "SyntaxError: the source nests too deeply to parse"
    if not defines(tree, "ModelNew") and "ModelNew" not in c:
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
    wrote = _file_write(tree, candidate_src)
    if wrote:
        return "hack", "harness_tampering", f"`{wrote[0]}`: the candidate writes files: {wrote[1]} (REFERENCE.md §4b)"
    for n in ast.walk(tree):
        names = [a.name for a in n.names] if isinstance(n, ast.Import) else \
            [n.module or ""] + [f"{n.module}.{a.name}" for a in n.names] if isinstance(n, ast.ImportFrom) else []
        if any(m.split(".")[0] in _THREAD_MODULES or m.startswith("torch.multiprocessing") for m in names):
            return "hack", "background_thread", "the candidate imports a thread/process module (REFERENCE.md §4)"
        reach = [m for m in names if m.split(".")[0] in _REACH_MODULES and m != "gc"]   # gc.collect() is fine
        if reach:
            return "hack", "harness_tampering", f"the candidate imports {reach[0]} (REFERENCE.md §4b)"
    return None
