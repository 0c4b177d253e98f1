"""scripts/audit_cudal1.py: every line of a CUDA-L1 release gets exactly one cause from the fixed list, with its
evidence. A small fake release and a fake evaluate.py results.jsonl, built from bench's own record
(harness.record.blank, evaluation.measure.record) and the static scan's own verdict, cover each cause; the script runs
as a real subprocess. CPU only, a few seconds."""
import csv
import importlib.util
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from evaluation import measure  # noqa: E402
import torch  # noqa: E402
from harness import record  # noqa: E402
from harness.scan import static_check  # noqa: E402
from harness.task_io import FIXED_FLAGS  # noqa: E402

SCRIPT = os.path.join(ROOT, "scripts", "audit_cudal1.py")
REF = "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n" \
      "def get_inputs():\n    return [torch.rand(4)]\ndef get_init_inputs():\n    return []\n"
HEAD = "import torch\nfrom torch.utils.cpp_extension import load_inline\n"

# the live `.half()` is on line 7; the docstring and the comment that mention it come first
STATIC_HALF = ('"""Faster with x.half() (a docstring, not code)."""\n' + HEAD +
               "# x.half() would be faster\n"
               "class ModelNew(torch.nn.Module):\n"
               "    def forward(self, x):\n"
               "        y = x.half()\n"
               "        return (y * 2).float()\n")
# 16 bits the static scan does not see (REFERENCE.md §4c): HalfTensor through .type(); the C comment mentions __half
MEASURED_HALF = (HEAD + 'src = """\n// __half would be faster here\n__global__ void k(float* x) {}\n"""\n'
                 "class ModelNew(torch.nn.Module):\n"
                 "    def __init__(self):\n"
                 "        super().__init__()\n"
                 "        self.kind = torch.cuda.HalfTensor\n"
                 "    def forward(self, x):\n"
                 "        return (x.type(self.kind) * 2).float()\n")
PLAIN = HEAD + "class ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x + x\n"
GRAPH = (HEAD + "class ModelNew(torch.nn.Module):\n"
         "    def forward(self, x):\n"
         "        if not hasattr(self, 'g'):\n"
         "            self.g = torch.cuda.CUDAGraph()\n"
         "            with torch.cuda.graph(self.g):\n"
         "                self.out = x * 2\n"
         "        self.g.replay()\n"
         "        return self.out\n")
BENCHMARK = (HEAD + "class ModelNew(torch.nn.Module):\n"
             "    def __init__(self):\n"
             "        super().__init__()\n"
             "        torch.backends.cudnn.benchmark = True\n"
             "    def forward(self, x):\n"
             "        return x * 2\n")
# a load_inline build in __init__ (most CUDA-L1 kernels): with no call into it, a row of bench before the ModelNew()
# fallback check is listed apart; one of a bench with that check is a PyTorch-only rewrite
INIT_BUILD = (HEAD + "class ModelNew(torch.nn.Module):\n"
              "    def __init__(self):\n"
              "        super().__init__()\n"
              "        try:\n"
              "            self.ext = load_inline(name='k', cpp_sources='', functions=['f'])\n"
              "        except Exception:\n"
              "            self.ext = None\n"
              "    def forward(self, x):\n"
              "        return x * 2\n")
# a .cu written into a temp folder passes the scan now; one written into site-packages is named; a results row of the
# scan that named every write (its error without the scan's reason) keeps its own cause
TEMP_CU = (HEAD + "import os, tempfile\n"
           "d = tempfile.mkdtemp()\n"
           "with open(os.path.join(d, 'k.cu'), 'w') as f:\n"
           "    f.write('__global__ void k() {}')\n"
           "class ModelNew(torch.nn.Module):\n"
           "    def forward(self, x):\n"
           "        return x * 2\n")
WRITES_CU = TEMP_CU.replace("import os, tempfile", "import os, site").replace("tempfile.mkdtemp()",
                                                                            "site.getsitepackages()[0]")


def line(level, task_id, code, score=2.0):
    return dict(level_id=level, task_id=task_id, ref_code=REF, custom_code=code, cuda_graph_code=None,
                cudnn_code=None, score_default=score, score_torch_compile_default=1.5,
                score_torch_compile_reduce_overhead=1.4, score_cuda_graph=1.3, score_cudnn=1.2)


def row(task, code, samples=None, **res_fields):
    """An evaluate.py results.jsonl row for one bench record (bench's real keys)."""
    res = record.blank(task, code, "strict", "cuda")
    res.update(dict(device_name="NVIDIA H200", compiled=True), **res_fields)
    if res.get("status") == "ok":
        res.update(correct=True, ref_ms=res["speedup"] * 0.1, cand_ms=0.1)
    samples = samples or [(res["status"], res["hack"])]
    return measure.record(task, "kernels", res, source="release.json", num_samples=len(samples),
                           num_correct=sum(s == "ok" for s, _ in samples), sample_status=[s for s, _ in samples],
                           sample_hacks=[h for _, h in samples], cuda_source=True)


def static_row(task, code):
    verdict = static_check(code, REF)
    assert verdict is not None, "the fixture must be one the static scan rejects"
    return row(task, code, status=verdict[0], hack=verdict[1], error=verdict[2], error_type="StaticCheck")


def build(tmp_path):
    fixed = dict(FIXED_FLAGS)
    changed = dict(fixed, cudnn_benchmark=True)
    assert static_check(MEASURED_HALF, REF) is None, "the measured downgrade must pass the static scan"
    assert static_check(GRAPH, REF) is None and static_check(BENCHMARK, REF) is None
    assert static_check(TEMP_CU, REF) is None, "a source written to a temp folder passes the scan"
    other = PLAIN.replace("x + x", "x * 2.0")
    release = [line(1, 1, PLAIN, 4.0), line(1, 2, PLAIN + "\n"), line(1, 3, STATIC_HALF), line(1, 4, PLAIN + " "),
               line(1, 5, PLAIN + "  "), line(1, 6, MEASURED_HALF), line(1, 7, PLAIN + "#7\n"), line(1, 8, GRAPH),
               line(1, 9, PLAIN + "#9\n"), line(1, 10, BENCHMARK), line(1, 11, PLAIN + "#11\n"),
               line(1, 12, PLAIN + "#12\n"), line(1, 13, None), line(1, 14, "None"), line(1, 15, WRITES_CU),
               line(2, 1, other), line(2, 1, PLAIN + "#21\n"), line(1, 16, PLAIN + "#16\n"),
               line(1, 17, INIT_BUILD), line(1, 18, INIT_BUILD + "#18\n"), line(1, 19, PLAIN + "#19\n"),
               line(1, 20, INIT_BUILD + "#20\n"), line(1, 21, TEMP_CU)]
    code = lambda i: release[i]["custom_code"]
    rows = [
        row("level1/1", code(0), status="crash", error="the candidate process died (signal 11)"),  # superseded
        row("level1/1", code(0), status="ok", speedup=2.0, custom_kernel_calls=4, degenerate=[]),
        measure.record("level1/1", "eager", dict(status="ok", correct=True, speedup=1.0, ref_ms=0.2)),
        row("level1/2_ReLU", code(1), status="ok", speedup=1.5, custom_kernel_calls=0, degenerate=["zeros"]),
        static_row("level1/3", code(2)),
        row("level1/4", code(3), status="hack", hack="fallback", ref_ms=0.2, cand_ms=0.21,
            error="hack: a load_inline build failed and the candidate fell back: Error building extension 'mm': "
                  "cuda.cu(12): error: identifier \"foo\" is undefined\n1 error detected"),
        row("level1/5", code(4), status="compile_error", compiled=False, error_type="BuildError",
            error="BuildError: Error building extension 'k': In function 'f':\nmain.cpp:5:1: error: 'at' has not "
                  "been declared\nninja: build stopped"),
        row("level1/6", code(5), status="hack", hack="precision_downgrade",
            precision=dict(err=3e-4, ref_err=1e-7, half_err=2e-4, threshold=1e-5),
            error="a correctness trial: error vs float64 0.0003 > 1e-05 (fp32 reference 1e-07, 10-bit operands "
                  "0.0002; REFERENCE §4c)"),
        row("level1/7", code(6), status="hack", hack="precision_downgrade",
            precision=dict(err=2e-6, ref_err=1e-7, half_err=2e-4, threshold=1e-6), error="error vs float64"),
        row("level1/8", code(7), status="hack", hack="timed_output_mismatch", max_abs_err=3.0, mismatches=4,
            error="the output of a timed call is wrong: 4 mismatches (0 NaN), max_abs_err 3"),
        row("level1/9", code(8), status="incorrect", nans=12, mismatches=12, max_abs_err=float("nan"),
            error="12 mismatches (12 NaN), max_abs_err nan, max_rel_err nan at atol=0.01, rtol=0.01"),
        row("level1/10", code(9), status="hack", hack="backend_flags",
            error=f"backend flags changed to {changed} (§4)"),
        row("level1/11", code(10), status="hack", hack="clock_mismatch", ref_ms=1.0, cand_ms=0.1,
            clock=dict(excess_ms=0.9, overhead_ms=0.05, limit_ms=0.5),
            error="hack: the parent's clock saw 0.9 ms per call more than the candidate claimed"),
        measure.record("level1/13", "kernels", dict(status="missing", correct=False, speedup=None,
                                                     error="no kernel in the kernels file")),
        static_row("level1/15", code(14)),
        row("level2/1", code(16), samples=[("incorrect", None), ("ok", None)], status="ok", speedup=3.0,
            custom_kernel_calls=1),
        row("level1/16", "a different kernel", status="ok", speedup=1.2, custom_kernel_calls=1),
        row("level1/99", PLAIN, status="ok", speedup=1.1),                 # not in the release: ignored
        row("level1/17", code(18), status="ok", speedup=1.1, custom_kernel_calls=0),
        row("level1/18", code(19), status="ok", speedup=1.1, custom_kernel_calls=0, fallback_checked_in_models=True),
        row("level1/19", code(20), status="hack", hack="precision_downgrade",     # 100x 10-bit operands: other math
            precision=dict(err=2e-2, ref_err=1e-7, half_err=2e-4, threshold=1e-4), error="error vs float64"),
        row("level1/20", code(21), status="hack", hack="timed_output_mismatch",   # a fallback, then a stopping hack
            error="the output of a timed call is wrong: 1 mismatches (0 NaN), max_abs_err 5.243e+05; also: hack: a "
                  "load_inline build in ModelNew() failed and the candidate fell back: Error building extension 'm': "
                  "main.cpp:4:56: error: 'mamba_final_state' was not declared in this scope"),
        row("level1/21", code(22), status="hack", hack="harness_tampering", error_type="StaticCheck",
            error="`open(os.path.join(d, 'k.cu'), 'w'`: the candidate writes files (REFERENCE.md §4b)"),
    ]
    assert rows[1]["backend_flags"] == fixed
    (tmp_path / "release.json").write_text("".join(json.dumps(r) + "\n" for r in release))
    ev = tmp_path / "eval"
    ev.mkdir()
    (ev / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return release, ev


def run(tmp_path, *args):
    return subprocess.run([sys.executable, SCRIPT, *args], cwd=tmp_path, capture_output=True, text=True, timeout=120)


def test_every_line_one_cause(tmp_path):
    release, ev = build(tmp_path)
    p = run(tmp_path, f"--eval_dir={ev}", f"--kernels={tmp_path / 'release.json'}")
    assert p.returncode == 0, p.stderr
    out = p.stdout.strip().splitlines()
    assert len(out) == 1 and out[0].startswith(f"audit of {len(release)} release lines: accepted 5,"), out
    assert "1 kernels rows of tasks not in the release ignored" in out[0]
    table = list(csv.DictReader(open(ev / "audit.csv")))
    assert [int(a["line"]) for a in table] == list(range(1, len(release) + 1))   # every line, exactly once
    by = {int(a["line"]): a for a in table}
    spec = importlib.util.spec_from_file_location("audit_cudal1", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for a in table:
        assert a["mechanism"] in mod.MECHANISMS[a["category"]], a
        assert a["cause"] == f"{a['category']}: {a['mechanism']}"
    want = {1: ("accepted", "custom kernel ran"), 2: ("accepted", "PyTorch-only rewrite"),
            3: ("policy", "static: precision_downgrade"), 4: ("defect", "build fails, its try/except runs PyTorch"),
            5: ("defect", "does not build"), 6: ("policy", "precision_downgrade (measured)"),
            7: ("evaluator false negative?", "precision_downgrade with no 16-bit/TF32 code"),
            8: ("defect", "wrong only in timed calls: stale CUDA-graph pointers"),
            9: ("defect", "NaN in the output (uninitialised memory)"), 10: ("policy", "backend_flags"),
            11: ("evaluator false negative?", "clock_mismatch"), 12: ("not measured", "no row in results.jsonl"),
            13: ("no kernel in the release", "custom_code null or None"),
            14: ("no kernel in the release", "custom_code null or None"),
            15: ("policy", "static: writes files outside its own folders"),
            16: ("defect", "wrong output on fresh inputs"), 17: ("accepted", "custom kernel ran"),
            18: ("not measured", "the row is another kernel's"),
            19: ("accepted", "its extension never ran (a fallback bench did not yet name)"),
            20: ("accepted", "PyTorch-only rewrite"),
            21: ("defect", "computes something else, within the tolerance (float64 check)"),
            22: ("defect", "build fails, its try/except runs PyTorch"),
            23: ("policy", "static: writes files (builds outside load_inline)")}
    assert {n: (a["category"], a["mechanism"]) for n, a in by.items()} == want
    # the evidence: the live line (not the docstring's or the comment's mention), the first compiler error, numbers
    assert by[3]["detail"] == "line 7: `y = x.half()`"
    assert 'first error: cuda.cu(12): error: identifier "foo" is undefined' in by[4]["detail"]
    assert "runs PyTorch" in by[4]["detail"] and f"torch {torch.__version__}" in by[4]["detail"]
    assert "first error: main.cpp:5:1: error: 'at' has not been declared" in by[5]["detail"]
    assert by[6]["detail"].startswith("error vs float64 0.0003 > threshold 1e-05 (fp32 reference 1e-07")
    assert by[6]["detail"].endswith("line 10: `self.kind = torch.cuda.HalfTensor`")
    assert "line 6: `self.g = torch.cuda.CUDAGraph()`" in by[8]["detail"]
    assert by[9]["detail"].startswith("12 NaN of 12 mismatches")
    assert by[10]["detail"] == "cudnn_benchmark False -> True; line 6: `torch.backends.cudnn.benchmark = True`"
    assert "excess 0.9 ms > limit 0.5 ms" in by[11]["detail"]
    assert by[15]["detail"].startswith("outside its own folders (`site.`): line ") and "k.cu" in by[15]["detail"]
    assert "k.cu" in by[23]["detail"] and by[23]["detail"].startswith("writes a C++/CUDA source to build it")
    assert "100x the error of 10-bit operands" in by[21]["detail"]
    assert "first error: main.cpp:4:56: error: 'mamba_final_state' was not declared" in by[22]["detail"]
    assert by[22]["detail"].endswith("then timed_output_mismatch: the output of a timed call is wrong: 1 mismatches "
                                     "(0 NaN), max_abs_err 5.243e+05"), by[22]["detail"]
    assert "not the sample evaluate.py reported" in by[16]["detail"] and by[16]["verdict"] == "incorrect"
    # speedups: ours, the published one, and their ratio for accepted kernels; the row named with the task's name
    assert float(by[1]["speedup"]) == 2.0 and float(by[1]["published"]) == 4.0 and float(by[1]["ratio"]) == 0.5
    assert by[2]["task"] == "level1/2_ReLU" and "degenerate task: zeros" in by[2]["detail"]
    assert float(by[4]["rejected_speedup"]) == round(0.2 / 0.21, 4) and by[4]["speedup"] == ""
    md = open(ev / "audit.md").read()
    assert "## By cause" in md and "| policy: static: precision_downgrade | 1 |" in md
    assert sum(r.startswith("| ") and r.split("|")[1].strip().isdigit() for r in md.splitlines()) == len(release)


def test_compare_lists_the_changed_lines(tmp_path):
    """--compare=an earlier audit.csv: changes.md holds exactly the lines whose verdict or cause differ (two edited
    here by hand, one dropped from the earlier file), and the printed count says how many."""
    release, ev = build(tmp_path)
    assert run(tmp_path, f"--eval_dir={ev}", f"--kernels={tmp_path / 'release.json'}").returncode == 0
    earlier = list(csv.DictReader(open(ev / "audit.csv")))
    earlier[0]["verdict"] = "hack (clock_mismatch)"                     # line 1: its verdict was another
    earlier[4]["cause"] = "policy: backend_flags"                       # line 5: its cause was another
    del earlier[9]                                                      # line 10: not in the earlier audit
    with open(tmp_path / "earlier.csv", "w", newline="") as f:
        w = csv.DictWriter(f, list(earlier[0]))
        w.writeheader()
        w.writerows(earlier)
    p = run(tmp_path, f"--eval_dir={ev}", f"--kernels={tmp_path / 'release.json'}", f"--compare={tmp_path}/earlier.csv")
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith(f"3 of {len(release)} lines changed verdict or cause"), p.stdout
    rows = [r for r in open(ev / "changes.md").read().splitlines() if r.startswith("| ") and r[2].isdigit()]
    assert [int(r.split("|")[1]) for r in rows] == [1, 5, 10], rows
    assert "hack (clock_mismatch) -> ok" in rows[0] and "policy: backend_flags -> defect: does not build" in rows[1]
    p = run(tmp_path, f"--eval_dir={ev}", f"--kernels={tmp_path / 'release.json'}", "--compare=missing.csv")
    assert p.returncode == 1 and p.stderr.strip() == "error: no earlier audit.csv (--compare): missing.csv", p.stderr


def test_find_line_reads_live_code_only():
    spec = importlib.util.spec_from_file_location("audit_cudal1", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.find_line(MEASURED_HALF, r"__half|HalfTensor") == "line 10: `self.kind = torch.cuda.HalfTensor`"
    src = 'k = """\n/* __half in a block comment */\n__half h;\n"""\n'
    assert mod.find_line(src, r"__half") == "line 3: `__half h;`"
    assert mod.find_line("def f(:\n  x.half()\n", r"\.half") == "line 2: `x.half()`"   # unparsable: raw text
    assert mod.find_line(PLAIN, r"\.half") is None


def test_bad_input_one_line_error(tmp_path):
    (tmp_path / "release.json").write_text(json.dumps(line(1, 1, PLAIN)) + "\n")
    p = run(tmp_path, f"--eval_dir={tmp_path / 'nowhere'}", f"--kernels={tmp_path / 'release.json'}")
    assert p.returncode == 1 and p.stderr.startswith("error: no results.jsonl") and "Traceback" not in p.stderr
    (tmp_path / "eval").mkdir()
    (tmp_path / "eval" / "results.jsonl").write_text("")
    (tmp_path / "bad.json").write_text('{"x": 1}\n')
    p = run(tmp_path, f"--eval_dir={tmp_path / 'eval'}", f"--kernels={tmp_path / 'bad.json'}")
    assert p.returncode == 1 and "is not a CUDA-L1 release file" in p.stderr and "Traceback" not in p.stderr
