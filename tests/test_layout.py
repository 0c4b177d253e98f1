"""The repository's shape, kept true: the top level is the design (one file per stage, bench.py, kernel_eval.cu and
the two shared modules), each file reads in one sitting (line budgets), code comments speak about the code as it is
(no issue numbers, sessions, dates, commits or cited results paths, in scripts and tests too), no import circles, no
stage script imports another, no re-export lists and no line over 120 columns. Each check also runs on a bad example,
so a check that cannot fail is caught too."""
import ast
import io
import os
import re
import subprocess
import sys
import tokenize

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STAGES = ("prepare", "sft", "rl", "evaluate")
TOP_FILES = {"prepare.py", "sft.py", "rl.py", "evaluate.py", "bench.py", "kernel_eval.cu", "common.py", "prompting.py",
             "README.md", "requirements.txt", "pytest.ini", ".gitignore"}
PACKAGES = ("harness", "evaluation", "training", "seed_data")   # the folders of Python modules named for their concern
TOP_FOLDERS = {".ci", "config", "data", "docs", "scripts", "tests", "results", *PACKAGES}
LINE_BUDGET = {"bench.py": 210, "prepare.py": 460, "sft.py": 460, "rl.py": 460, "evaluate.py": 460,
               "common.py": 350, "prompting.py": 350}
FOLDER_BUDGET = 650            # any other module of the repository
DOCSTRING_BUDGET = 32          # lines of a module docstring
README_BUDGET = (250, 20 * 1024)            # lines, bytes
HARNESS_README_BUDGET = 85                  # lines
HISTORY = re.compile(r"(?i:\bissues? #?\d+|\bsessions? \d+\b|\bcommit [0-9a-f]{7,}\b)|\bs\d{1,2}\b(?=[ ,;)'])"
                     r"|(?<!\d)20\d\d-\d\d-\d\d(?!\d)|results/|\bPR #?\d+")
OUTPUT_ARG = re.compile(r"(?:--[\w-]+[= ]\[?|\b[A-Z_]+=)results/")   # `--out results/x`: a usage line, not a citation
C_SUFFIXES = (".cu", ".cuh", ".cpp", ".h")
CODE_SUFFIXES = (".py", ".sh") + C_SUFFIXES
HEXHASH = re.compile(r"(?<![\w.])(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,12}(?![\w.])")


def tracked():
    """The repository's tracked files (git ls-files), else every file under ROOT outside ignored-looking folders."""
    p = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if p.returncode == 0 and p.stdout.strip():
        return [f for f in p.stdout.splitlines() if os.path.exists(os.path.join(ROOT, f))]
    found = []
    for dirpath, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if not d.startswith((".git", "out", "__pycache__", ".pytest"))]
        found += [os.path.relpath(os.path.join(dirpath, f), ROOT) for f in files]
    return found


def python_files(under=None):
    files = [f for f in tracked() if f.endswith(".py")]
    return [f for f in files if under is None or f.split("/")[0] in under]


def module_name(path):
    """'harness/judge.py' -> 'harness.judge'; 'rl.py' -> 'rl'; '__init__.py' -> its package."""
    name = path[:-3].replace("/", ".")
    return name[:-len(".__init__")] if name.endswith(".__init__") else name


def repo_imports():
    """{module: {repository modules it imports anywhere in its source, inside functions too}} for the top-level
    modules and the packages' modules (scripts and tests are leaves: nothing imports them)."""
    files = {module_name(f): f for f in python_files() if "/" not in f or f.split("/")[0] in PACKAGES}
    graph = {}
    for name, path in files.items():
        found = set()
        for node in ast.walk(ast.parse(open(os.path.join(ROOT, path)).read(), path)):
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module)
                found |= {f"{node.module}.{a.name}" for a in node.names}
        graph[name] = {m for m in found if m in files} - {name, name.split(".")[0]}
    return graph


def find_circle(graph):
    """One import circle as a list of modules (first == last), or None."""
    done, path = set(), []

    def visit(m):
        if m in path:
            return path[path.index(m):] + [m]
        if m in done:
            return None
        path.append(m)
        for n in sorted(graph.get(m, ())):
            circle = visit(n)
            if circle:
                return circle
        path.pop()
        done.add(m)
        return None
    for m in sorted(graph):
        circle = visit(m)
        if circle:
            return circle
    return None


def code_files():
    """The tracked code files (Python, shell, C++/CUDA, and scripts with a #! line) outside the results folder, which
    holds the runs' own dated records, and docs/, which is prose."""
    found = []
    for path in tracked():
        if path.split("/")[0] in ("results", "docs"):
            continue
        if path.endswith(CODE_SUFFIXES) or open(os.path.join(ROOT, path), "rb").read(2) == b"#!":
            found.append(path)
    return found


def comment_lines(source, path="<source>.py"):
    """[(line number, text)] of a code file's comments: Python's comments and docstrings, a shell script's `#`
    comments, C++/CUDA's // and /* */ comments (one entry per line)."""
    if path.endswith(C_SUFFIXES):
        return [(source.count("\n", 0, m.start()) + 1 + i, line)
                for m in re.finditer(r"//[^\n]*|/\*.*?\*/", source, re.S)
                for i, line in enumerate(m.group().splitlines())]
    if path.endswith(".sh") or (source.startswith("#!") and "python" not in source.split("\n", 1)[0]):
        return [(n, m.group(1)) for n, line in enumerate(source.splitlines(), 1)
                for m in [re.search(r"(?:^|\s)(#.*)", line)] if m]
    texts = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            texts.append((tok.start[0], tok.string))
    for node in ast.walk(ast.parse(source, path)):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc and node.body:
                first = node.body[0].lineno
                texts += [(first + i, line) for i, line in enumerate(doc.splitlines())]
    return texts


def history_lines(source, path="<source>.py"):
    """[(line number, text)] of comments and docstrings that cite an issue, a session or run, a date, a commit or a
    path under results (other than a usage line's output argument): history belongs in commit messages and
    docs/LOG.md, not in the code."""
    return [(n, t.strip()) for n, t in comment_lines(source, path)
            if HISTORY.search(OUTPUT_ARG.sub("", t)) or HEXHASH.search(t)]


def reexports(source):
    """Lines that import names only to re-export them (`from x import a  # noqa: F401`); an `import x` kept for its
    side effects is not one."""
    return [line for line in source.splitlines() if re.match(r"\s*from\b", line) and "F401" in line]


# ------------------------------------------------------------------------------------------------------ the checks

def test_top_level_is_the_design():
    top = {f.split("/")[0] for f in tracked()}
    unexpected = top - TOP_FILES - TOP_FOLDERS
    assert not unexpected, f"unexpected at the top level: {sorted(unexpected)}"
    missing = {"prepare.py", "sft.py", "rl.py", "evaluate.py", "bench.py", "kernel_eval.cu", "README.md"} - top
    assert not missing, f"missing at the top level: {sorted(missing)}"
    assert os.path.exists(os.path.join(ROOT, "harness", "README.md")), "harness/README.md: the evaluator's processes"


def stale_line_counts(readme):
    """The README's Files tour ("rl.py   460 lines  ...") against the files: each entry whose count is not wc -l's."""
    found = re.findall(r"^(\S+\.(?:py|cu))\s+(\d+) lines\b", readme, re.M)
    assert len(found) >= 8, f"the README's Files tour lists too few files: {found}"
    counts = {name: open(os.path.join(ROOT, name)).read().count("\n") for name, _ in found}
    return [f"{name}: the README says {n} lines, the file has {counts[name]}" for name, n in found
            if counts[name] != int(n)]


def test_the_readme_gives_each_file_its_length():
    stale = stale_line_counts(open(os.path.join(ROOT, "README.md")).read())
    assert not stale, "\n".join(stale)
    tour = "".join(f"{name}  {open(os.path.join(ROOT, name)).read().count(chr(10)) + 1} lines  the tour\n"
                   for name in ("prepare.py", "sft.py", "rl.py", "evaluate.py", "bench.py", "kernel_eval.cu",
                                "common.py", "prompting.py"))
    assert len(stale_line_counts(tour)) == 8, "the check cannot fail"


def test_files_read_in_one_sitting():
    over = []
    for path in python_files():
        if path.split("/")[0] in ("tests", "scripts"):
            continue
        source = open(os.path.join(ROOT, path)).read()
        budget = LINE_BUDGET.get(path, FOLDER_BUDGET)
        if source.count("\n") > budget:
            over.append(f"{path}: {source.count(chr(10))} lines > {budget}")
        doc = ast.get_docstring(ast.parse(source), clean=False) or ""
        if len(doc.splitlines()) > DOCSTRING_BUDGET:
            over.append(f"{path}: module docstring {len(doc.splitlines())} lines > {DOCSTRING_BUDGET}")
    readme = open(os.path.join(ROOT, "README.md"), "rb").read()
    if readme.count(b"\n") > README_BUDGET[0] or len(readme) > README_BUDGET[1]:
        over.append(f"README.md: {readme.count(bytes([10]))} lines, {len(readme)} bytes > {README_BUDGET}")
    harness_readme = open(os.path.join(ROOT, "harness", "README.md")).read()
    if harness_readme.count("\n") > HARNESS_README_BUDGET:
        over.append(f"harness/README.md: {harness_readme.count(chr(10))} lines > {HARNESS_README_BUDGET}")
    assert not over, "\n".join(over)


def test_code_comments_carry_no_history():
    """Every code file but those of the results and docs folders: the modules, scripts/, tests/ with their fixtures,
    hacks and legit kernels, data/'s kernels, shell scripts and CUDA sources."""
    files = code_files()
    kinds = {os.path.splitext(f)[1] for f in files} | {f.split("/")[0] for f in files if "/" in f}
    assert {".py", ".sh", ".cu", "scripts", "tests"} <= kinds, f"the check reads too little: {sorted(kinds)}"
    found = []
    for path in files:
        found += [f"{path}:{n}: {t}" for n, t in history_lines(open(os.path.join(ROOT, path)).read(), path)]
    assert not found, ("comments and docstrings citing history (an issue, session, run, date, commit or results"
                       " path): say what the code does and why (citing docs/REFERENCE.md if need be) and put the"
                       " history in the commit message or docs/LOG.md:\n" + "\n".join(found))


def test_no_line_over_120_columns():
    """Code and tests; data/ holds the demo's kernels as the model learns to write them, left as they are."""
    files = [f for f in python_files() + ["kernel_eval.cu"] if not f.startswith("data/")]
    long = [f"{path}:{i}" for path in files if os.path.exists(os.path.join(ROOT, path))
            for i, line in enumerate(open(os.path.join(ROOT, path)).read().splitlines(), 1) if len(line) > 120]
    assert not long, f"{len(long)} lines over 120 columns: {long[:20]}"


def test_no_reexport_lists():
    found = [f"{path}: {line.strip()}" for path in python_files() if path.split("/")[0] not in ("tests", "scripts")
             for line in reexports(open(os.path.join(ROOT, path)).read())]
    assert not found, "import a name from where it lives, not through a re-export:\n" + "\n".join(found)


def test_no_stage_script_imports_another():
    graph = repo_imports()
    assert set(STAGES) <= set(graph), sorted(graph)
    bad = {s: sorted(graph[s] & set(STAGES)) for s in STAGES if graph[s] & set(STAGES)}
    assert not bad, f"stage scripts importing other stage scripts: {bad}"


def test_no_import_circle():
    graph = repo_imports()
    assert any("." in m for m in graph), "the packages' modules are in the graph"
    circle = find_circle(graph)
    assert circle is None, f"import circle: {' -> '.join(circle)}"


def test_stage_imports_in_a_fresh_interpreter():
    """Importing each stage module (as the tests do) brings in no other stage module."""
    code = ("import sys\nstages = %r\nfor s in stages:\n    before = set(sys.modules)\n    __import__(s)\n"
            "    extra = (set(sys.modules) - before) & set(stages) - {s}\n"
            "    assert not extra, (s, sorted(extra))\nprint('ok')\n") % (STAGES,)
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, PYTHONPATH=ROOT))
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr[-3000:]


# ----------------------------------------------------------------------------------- the checks can fail

def test_the_circle_check_can_fail():
    assert find_circle({"a": {"b"}, "b": {"a"}, "c": set()}) == ["a", "b", "a"]
    assert find_circle({"a": {"b"}, "b": set()}) is None


@pytest.mark.parametrize("comment", ["# measured in session 8", "# see issue 12 item 3", "# (2026-12-02_s12)",
                                     "# results/bench/x.log", "# since commit 33603f0", "# fixed in 885b8fb",
                                     "# read 0.49 ms (s8, s12) against 0.5", "# Issue 12: the lock",
                                     "# see --out results/x.log and results/y.log"])
def test_the_history_check_can_fail(comment):
    assert history_lines(f"x = 1  {comment}\n"), comment
    assert history_lines(f'def f():\n    """{comment[2:]}"""\n'), comment


@pytest.mark.parametrize("path, source", [("a.sh", "#!/bin/sh\necho hi  # measured in session 8\n"),
                                          (".ci/run", "#!/usr/bin/env bash\n# the fix of issue 12\n"),
                                          ("k.cu", "__global__ void k() {}  // see issue 12\n"),
                                          ("k.cu", "/* the clock\n   of 2026-12-02 */\n__global__ void k() {}\n")])
def test_the_history_check_reads_shell_and_cuda_comments(path, source):
    assert history_lines(source, path), (path, source)


@pytest.mark.parametrize("comment", ["# REFERENCE.md §4c: precision", "# 2x L2 bytes, 0x06 is the limit's id",
                                     "# sha256 of the source", "# 120 columns", "# seeds 1337 and 42",
                                     "#   python scripts/x.py --out results/bench/x.json [--n 64]",
                                     "#   RESULTS=results/tiny/h200/x scripts/ablate.sh"])
def test_the_history_check_lets_plain_comments_pass(comment):
    assert not history_lines(f"x = 1  {comment}\n"), comment


def test_the_reexport_check_can_fail():
    assert reexports("from harness.session import WALL_OVER  # noqa: F401\n")
    assert not reexports("from harness.session import WALL_OVER\n")
