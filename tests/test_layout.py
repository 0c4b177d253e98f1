"""The module layout (issue 14 item 7): no stage script imports another one (they share code through common.py,
prompting.py, taskset.py, report.py, baseline.py; rl.py runs the other stages as subprocesses), and the
repository's modules import each other without a circle, counting the imports inside functions too (where
evaluate.py and prepare.py used to import each other)."""
import ast
import glob
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STAGES = ("prepare", "sft", "rl", "evaluate")


def repo_imports():
    """{module: {repo modules it imports anywhere in its source}} for every .py file at the repository's root."""
    mods = {os.path.basename(p)[:-3]: p for p in glob.glob(os.path.join(ROOT, "*.py"))}
    graph = {}
    for name, path in mods.items():
        found = set()
        for node in ast.walk(ast.parse(open(path).read(), path)):
            if isinstance(node, ast.Import):
                found |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
        graph[name] = found & set(mods) - {name}
    return graph


def test_no_stage_script_imports_another():
    graph = repo_imports()
    assert set(STAGES) <= set(graph), sorted(graph)
    bad = {s: sorted(graph[s] & set(STAGES)) for s in STAGES if graph[s] & set(STAGES)}
    assert not bad, f"stage scripts importing other stage scripts: {bad}"


def test_no_import_circle():
    graph = repo_imports()
    done, path = set(), []

    def visit(m):
        assert m not in path, f"import circle: {' -> '.join(path[path.index(m):] + [m])}"
        if m in done:
            return
        path.append(m)
        for n in sorted(graph[m]):
            visit(n)
        path.pop()
        done.add(m)
    for m in sorted(graph):
        visit(m)


def test_stage_imports_in_a_fresh_interpreter():
    """Importing each stage module (as the tests do) brings in no other stage module."""
    code = ("import sys\nstages = %r\nfor s in stages:\n    before = set(sys.modules)\n    __import__(s)\n"
            "    extra = (set(sys.modules) - before) & set(stages) - {s}\n"
            "    assert not extra, (s, sorted(extra))\nprint('ok')\n") % (STAGES,)
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, PYTHONPATH=ROOT))
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr[-3000:]


def test_the_circle_check_can_fail(tmp_path, monkeypatch):
    """The circle check on a graph with a circle (a -> b -> a) does fail."""
    import pytest
    monkeypatch.setattr(sys.modules[__name__], "repo_imports", lambda: {"a": {"b"}, "b": {"a"}, "c": set()})
    with pytest.raises(AssertionError, match="import circle: a -> b -> a"):
        test_no_import_circle()
