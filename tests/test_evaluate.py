"""Tests of evaluate.py on CPU: the statistics by hand, the kernels-file readers, the baseline modules, the whole
script with a fake bench (fast, always runs), and the whole script through the real bench.py (skipped until it exists)."""
import importlib.util
import json
import math
import os
import runpy
import subprocess
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(ROOT, "tests", "fixtures")
sys.path.insert(0, ROOT)
import evaluate  # noqa: E402

SAMPLE = "/work/shared/cudal1_sample/a100_sample.jsonl"


# ---- summarize, checked by hand --------------------------------------------------------------------------------

def test_summarize_by_hand():
    s = evaluate.summarize([2.0, None, 0.5, 1.0, 4.0])
    assert s["tasks"] == 5 and s["successes"] == 4
    assert s["mean"] == pytest.approx((2 + 1 + 0.5 + 1 + 4) / 5)  # 1.7: the failure counts as 1.0
    assert s["mean_success"] == pytest.approx((2 + 0.5 + 1 + 4) / 4)  # 1.875
    # padded and sorted: [0.5, 1, 1, 2, 4]. Linear interpolation at position (n-1)*q = 4q:
    # p25 -> position 1 -> 1.0; p50 -> position 2 -> 1.0; p75 -> position 3 -> 2.0
    assert (s["p25"], s["p50"], s["median"], s["p75"]) == (1.0, 1.0, 1.0, 2.0)
    assert s["geomean"] == pytest.approx((2 * 1 * 0.5 * 1 * 4) ** (1 / 5))  # 4 ** 0.2 = 1.3195
    assert s["max"] == 4.0
    assert s["count_gt_1_01"] == 2  # 2.0 and 4.0; 1.0 is not > 1.01
    assert s["fast_0"] == pytest.approx(4 / 5)  # correctness rate
    assert s["fast_1"] == pytest.approx(2 / 5)  # 1.0 is not > 1
    assert s["fast_1.5"] == pytest.approx(2 / 5)
    assert s["fast_2"] == pytest.approx(1 / 5)  # strict: 2.0 is not > 2


def test_summarize_interpolates_between_order_statistics():
    s = evaluate.summarize([3.0, None, None, 1.5])  # padded, sorted: [1, 1, 1.5, 3]; positions 0.75, 1.5, 2.25
    assert s["p25"] == pytest.approx(1.0)
    assert s["median"] == pytest.approx(1.25)  # halfway between 1 and 1.5
    assert s["p75"] == pytest.approx(1.5 + 0.25 * 1.5)  # 1.875
    assert s["mean"] == pytest.approx(6.5 / 4) and s["mean_success"] == pytest.approx(2.25)


def test_summarize_empty_and_all_failures():
    e = evaluate.summarize([])
    assert e["tasks"] == 0 and e["successes"] == 0 and e["count_gt_1_01"] == 0
    assert all(e[k] is None for k in ("mean", "mean_success", "median", "geomean", "max", "p25", "p75", "fast_0", "fast_2"))
    f = evaluate.summarize([None, None, None])
    assert f["successes"] == 0 and f["mean_success"] is None
    assert f["mean"] == f["median"] == f["geomean"] == f["max"] == f["p25"] == f["p75"] == 1.0
    assert f["fast_0"] == f["fast_1"] == f["fast_2"] == 0.0


def test_summarize_treats_nonsense_as_failure():
    s = evaluate.summarize([float("nan"), 0.0, -2.0, float("inf"), 2.0])
    assert s["successes"] == 1 and s["mean"] == pytest.approx(6 / 5)


def test_markdown_table_numbers():
    entries = [dict(method="kernels", level="level1", **evaluate.summarize([2.0, None, 0.5, 1.0, 4.0])),
               dict(method="compile", level="all", **evaluate.summarize([None]))]
    table = evaluate.markdown_table(entries)
    lines = table.strip().splitlines()
    assert lines[0].startswith("| method | level | tasks | ok | mean | mean ok | median | geomean | max |")
    assert len(lines) == 4
    assert lines[2] == ("| kernels | level1 | 5 | 4 | 1.70 | 1.88 | 1.00 | 1.32 | 4.00 | 1.00 | 2.00 | 2 "
                        "| 0.80 | 0.40 | 0.40 | 0.20 |")
    assert lines[3] == "| compile | all | 1 | 0 | 1.00 | - | 1.00 | 1.00 | 1.00 | 1.00 | 1.00 | 0 | 0.00 | 0.00 | 0.00 | 0.00 |"


# ---- readers -----------------------------------------------------------------------------------------------------

@pytest.mark.skipif(not os.path.exists(SAMPLE), reason="CUDA-L1 sample not present")
def test_read_cudal1_sample():
    rows = evaluate.read_kernels(SAMPLE)
    assert [r["task"] for r in rows] == ["level1/5", "level1/25", "level1/32", "level1/88", "level2/48", "level1/1",
                                         "level1/12"]
    assert all("class Model(" in r["ref_code"] and "def get_inputs" in r["ref_code"] for r in rows)
    assert all("class ModelNew" in r["code"] for r in rows)
    assert rows[0]["published"]["score_default"] == 1.015
    assert rows[0]["published"]["score_torch_compile_reduce_overhead"] == 2.351
    assert set(rows[0]["published"]) == {"score_default", "score_torch_compile_default", "score_cuda_graph",
                                         "score_torch_compile_reduce_overhead", "score_cudnn"}
    tasks = [dict(name="level1/25_Swish", level=1), dict(name="level2/48_Conv3d_Scaling", level=2),
             dict(name="level1/5_Matrix_scalar_multiplication", level=1), dict(name="level1/250_Other", level=1)]
    evaluate.match_tasks(rows, tasks)
    assert [r["task"] for r in rows[:5]] == ["level1/5_Matrix_scalar_multiplication", "level1/25_Swish", "level1/32",
                                             "level1/88", "level2/48_Conv3d_Scaling"]


def test_read_cudal1_none_and_project_rows():
    rows = evaluate.read_kernels(os.path.join(FIX, "eval_cudal1_none.jsonl"))
    assert [r["code"] for r in rows[:2]] == [None, None]  # the string "None" and null
    assert "ModelNew" in rows[2]["code"] and rows[2]["published"]["score_default"] == 42.0
    mine = evaluate.read_kernels(os.path.join(FIX, "eval_kernels.jsonl"))
    assert [(r["task"], r["level"], r["task_id"], r["ref_code"]) for r in mine] == [
        ("level1/1_RowScale", 1, 1, None), ("level2/1_TanhScale", 2, 1, None)]


def test_load_tasks_from_kernelbench_dir(tmp_path, monkeypatch):
    task = "class Model: pass\ndef get_inputs(): return []\ndef get_init_inputs(): return []\n"
    (tmp_path / "level1").mkdir()
    (tmp_path / "level1" / "19_ReLU.py").write_text(task)
    (tmp_path / "level3").mkdir()
    (tmp_path / "level3" / "2_MLP.py").write_text(task + "y = 2\n")
    monkeypatch.setattr(evaluate, "levels", "1,2,3")
    rows = sorted(evaluate.load_tasks("", str(tmp_path)), key=lambda r: r["name"])
    assert [(r["name"], r["level"], r["src"], r["split"]) for r in rows] == [
        ("level1/19_ReLU", 1, task, None), ("level3/2_MLP", 3, task + "y = 2\n", None)]
    assert evaluate.load_tasks(str(tmp_path / "nope.jsonl"), "") is None
    # a file that is not a task stops with a clear error naming it
    (tmp_path / "level1" / "bad.py").write_text("x = 1\n")
    with pytest.raises(SystemExit, match="bad.py: not a KernelBench task"):
        evaluate.load_tasks("", str(tmp_path))


# ---- baseline modules -------------------------------------------------------------------------------------------

def _tasks():
    return [json.loads(line) for line in open(os.path.join(FIX, "eval_tasks.jsonl"))]


def _build(src, cls):
    ns = {}
    exec(compile(src, "<candidate>", "exec"), ns)
    torch.manual_seed(42)
    return ns[cls](*ns["get_init_inputs"]()), ns


def test_compile_baselines_match_the_reference(monkeypatch):
    real, modes = torch.compile, []

    def fake_compile(fn, mode=None, **kw):  # inductor on 2 CPU cores takes ~90 s; dynamo with the eager backend does not
        modes.append(mode)
        return real(fn, backend="eager")
    monkeypatch.setattr(torch, "compile", fake_compile)
    task = _tasks()[1]["src"]
    for name, mode in (("compile", None), ("compile_reduce_overhead", "reduce-overhead")):
        m, ns = _build(evaluate.baseline_source(task, name), "ModelNew")
        r, _ = _build(task, "Model")
        assert isinstance(m, ns["Model"])  # same class, hence the same weights from the same seed
        x = ns["get_inputs"]()
        assert torch.allclose(m(*x), r(*x))
        assert modes[-1] == mode


def test_cuda_graph_and_cudnn_baselines_are_valid_modules():
    task = _tasks()[0]["src"]
    for name in ("cuda_graph", "cudnn_benchmark"):
        src = evaluate.baseline_source(task, name)
        assert src.startswith(task.rstrip())
        ns = {}
        exec(compile(src, "<candidate>", "exec"), ns)  # defines the classes; running them needs a GPU
        assert issubclass(ns["ModelNew"], ns["Model"])
    ns = {}
    exec(compile(evaluate.baseline_source(task, "cuda_graph"), "<c>", "exec"), ns)
    nested = (torch.ones(2), [torch.zeros(1), 3])
    out = ns["_clone_out"](nested)
    assert torch.equal(out[0], nested[0]) and out[0] is not nested[0] and out[1][1] == 3


# ---- the whole script with a fake bench ------------------------------------------------------------------------

class FakeBench:
    """Answers by looking at the candidate source; records every call."""
    def __init__(self, fail_many=False):
        self.calls, self.fail_many = [], fail_many

    def _one(self, cand):
        if "sigmoid" in cand:
            return dict(status="incorrect", correct=False, compiled=True, speedup=None, ref_ms=1.0, error="mismatch")
        if "torch.compile" in cand and "for i in range" in cand:  # compile "fails" on the row-loop task
            return dict(status="runtime_error", correct=False, speedup=None, error="dynamo: graph break storm")
        if "cudnn.benchmark" in cand:
            return dict(status="hack", correct=True, speedup=1.1, ref_ms=1.0, cand_ms=0.9, hack="backend_flags")
        speedup = 1.5 if "torch.compile" in cand else 2.0 if "CUDAGraph" in cand else 8.0 if "# FAST" in cand else 4.0
        return dict(status="ok", correct=True, speedup=speedup, ref_ms=1.0, cand_ms=1.0 / speedup, hack=None,
                    device_name="fake", protocol="strict")

    def evaluate_many(self, jobs, *, build_workers=None, progress=False, **kw):
        self.calls.append(("many", len(jobs), kw["static_checks"]))
        if self.fail_many:
            raise RuntimeError("pool died")
        return [self._one(cand) for _, _, cand in jobs]

    def evaluate(self, task_src, cand, *, task_name="task", **kw):
        self.calls.append(("one", task_name, kw["static_checks"]))
        if "sigmoid" in cand:
            raise RuntimeError("segfault in the worker")
        return self._one(cand)


def _run(monkeypatch, capsys, fake, *args):
    monkeypatch.setitem(sys.modules, "bench", fake)
    monkeypatch.setattr(sys, "argv", ["evaluate.py", *args])
    runpy.run_path(os.path.join(ROOT, "evaluate.py"), run_name="__main__")
    return capsys.readouterr().out


def _lines(path):
    return [json.loads(line) for line in open(path)]


def test_pipeline_with_fake_bench_and_resume(tmp_path, monkeypatch, capsys):
    fake, out = FakeBench(), str(tmp_path / "eval")
    args = [f"--kernels={FIX}/eval_kernels.jsonl", f"--tasks_file={FIX}/eval_tasks.jsonl", "--device=cpu",
            "--baselines=eager,compile,cuda_graph,cudnn_benchmark", f"--eval_dir={out}"]
    text = _run(monkeypatch, capsys, fake, *args)
    # one evaluate_many call per phase: the 2 kernels with static checks, then 2 tasks x 3 trusted baselines
    assert fake.calls == [("many", 2, True), ("many", 6, False)]
    rows = {(r["task"], r["method"]): r for r in _lines(f"{out}/results.jsonl")}
    assert len(rows) == 2 * 5
    assert rows[("level1/1_RowScale", "kernels")]["speedup"] == 4.0
    assert rows[("level2/1_TanhScale", "kernels")]["status"] == "incorrect"
    assert rows[("level2/1_TanhScale", "kernels")]["speedup"] is None
    assert rows[("level1/1_RowScale", "eager")]["speedup"] == 1.0 and rows[("level1/1_RowScale", "eager")]["ref_ms"] == 1.0
    assert rows[("level1/1_RowScale", "cudnn_benchmark")]["status"] == "unavailable"
    # kernels over both tasks: [4.0, fail] -> mean 2.5, mean ok 4.0, median 2.5, geomean 2.0, max 4.0
    assert "| kernels | all | 2 | 1 | 2.50 | 4.00 | 2.50 | 2.00 | 4.00 |" in text
    assert "| kernels | level2 | 1 | 0 | 1.00 | - |" in text
    assert "| compile | all | 2 | 1 | 1.25 | 1.50 |" in text  # [fail, 1.5]
    assert "| kernels vs compile | level1 | 1 | 1 | 4.00 |" in text  # compile failed there: compared with eager
    assert "| kernels vs compile | level2 | 1 | 0 | 1.00 |" in text
    assert "| kernels vs cuda_graph | all | 2 | 1 | 1.50 | 2.00 |" in text  # [4.0 / 2.0, fail]
    assert "cudnn_benchmark: unavailable" in text and "| cudnn_benchmark |" not in text
    summary = json.load(open(f"{out}/summary.json"))
    assert summary["unavailable"] == ["cudnn_benchmark"] and summary["config"]["device"] == "cpu"
    assert "| kernels | all |" in open(f"{out}/summary.md").read()
    assert os.path.getsize(f"{out}/speedup_sorted.png") > 0 and os.path.getsize(f"{out}/speedup_vs_baselines.png") > 0
    # rerun: everything is in results.jsonl, so bench is not called and no row is added
    n = len(_lines(f"{out}/results.jsonl"))
    text2 = _run(monkeypatch, capsys, fake, *args)
    assert fake.calls == [("many", 2, True), ("many", 6, False)]
    assert len(_lines(f"{out}/results.jsonl")) == n
    assert "resumed: 2 tasks already measured, 0 to go" in text2
    assert "| kernels | all | 2 | 1 | 2.50 | 4.00 | 2.50 | 2.00 | 4.00 |" in text2


def test_pipeline_survives_a_failing_bench(tmp_path, monkeypatch, capsys):
    fake, out = FakeBench(fail_many=True), str(tmp_path / "eval")
    text = _run(monkeypatch, capsys, fake, f"--kernels={FIX}/eval_kernels.jsonl", f"--tasks_file={FIX}/eval_tasks.jsonl",
                "--device=cpu", "--baselines=eager", f"--eval_dir={out}")
    assert ("one", "level2/1_TanhScale", True) in fake.calls  # fell back to one evaluate per job
    rows = {r["task"]: r for r in _lines(f"{out}/results.jsonl") if r["method"] == "kernels"}
    assert rows["level2/1_TanhScale"]["status"] == "crash" and "segfault" in rows["level2/1_TanhScale"]["error"]
    assert rows["level1/1_RowScale"]["speedup"] == 4.0
    assert "| kernels | all | 2 | 1 | 2.50 |" in text


def test_pipeline_cudal1_file_without_task_set(tmp_path, monkeypatch, capsys):
    fake, out = FakeBench(), str(tmp_path / "eval")
    text = _run(monkeypatch, capsys, fake, f"--kernels={FIX}/eval_cudal1_none.jsonl", "--tasks_file=/nonexistent.jsonl",
                "--device=cpu", "--baselines=eager", f"--eval_dir={out}")
    # the two lines without a kernel are not sent to bench; their references are then timed against themselves
    assert fake.calls == [("many", 1, True), ("many", 2, False)]
    eager = {r["task"]: r for r in _lines(f"{out}/results.jsonl") if r["method"] == "eager"}
    assert [eager[f"level1/{i}"]["ref_ms"] for i in (1, 2, 3)] == [1.0, 1.0, 1.0]
    rows = {r["task"]: r for r in _lines(f"{out}/results.jsonl") if r["method"] == "kernels"}
    assert [rows[f"level1/{i}"]["status"] for i in (1, 2, 3)] == ["missing", "missing", "ok"]
    assert rows["level1/3"]["published"]["score_default"] == 42.0
    assert "| kernels | level1 | 3 | 1 | 2.00 | 4.00 |" in text  # [fail, fail, 4.0] -> (1 + 1 + 4) / 3
    assert "| published | level1 | 3 | 1 | 14.67 | 42.00 |" in text  # score 0.0 is no kernel: (1 + 1 + 42) / 3


def test_pipeline_filters(tmp_path, monkeypatch, capsys):
    fake = FakeBench()
    text = _run(monkeypatch, capsys, fake, f"--kernels={FIX}/eval_kernels.jsonl", f"--tasks_file={FIX}/eval_tasks.jsonl",
                "--device=cpu", "--baselines=eager", "--split=eval", f"--eval_dir={tmp_path}/a")
    assert "| kernels | all | 1 | 1 | 4.00 |" in text and "| level2 |" not in text
    text = _run(monkeypatch, capsys, fake, f"--kernels={FIX}/eval_kernels.jsonl", f"--tasks_file={FIX}/eval_tasks.jsonl",
                "--device=cpu", "--baselines=eager", "--levels=2", f"--eval_dir={tmp_path}/b")
    assert "| kernels | all | 1 | 0 | 1.00 |" in text
    with pytest.raises(SystemExit):
        _run(monkeypatch, capsys, fake, f"--kernels={FIX}/eval_kernels.jsonl", "--baselines=eager,fast", "--device=cpu")


def test_pipeline_with_a_model(tmp_path, monkeypatch, capsys):
    import common
    tasks, kern = _tasks(), [json.loads(line)["code"] for line in open(os.path.join(FIX, "eval_kernels.jsonl"))]
    answers = {  # two samples per task: best of 2 is the faster correct one; a format error is a failed sample
        "level1/1_RowScale": [common.format_response("a", "d", kern[0]), common.format_response("a", "d", kern[0] + "# FAST\n")],
        "level2/1_TanhScale": ["no sections at all", common.format_response("a", "d", kern[1])]}
    seen = {}

    def fake_generate(model, tok, prompts, num_generations, max_new_tokens, temperature=1.0, **kw):
        seen["prompts"] = prompts
        for p in prompts:
            name = next(t["name"] for t in tasks if t["src"].strip() in p)
            for text in answers[name][:num_generations]:
                yield dict(prompt_ids=[], completion_ids=[], truncated=False, text=text)
    monkeypatch.setattr(common, "load_model", lambda name, device="cpu", dtype="float32": (None, None))
    monkeypatch.setattr(common, "generate", fake_generate)
    db = tmp_path / "db.json"
    db.write_text(json.dumps({"level1/1_RowScale": [dict(code="class ModelNew: A", speedup=1.2, step=1),
                                                    dict(code="class ModelNew: B", speedup=3.5, step=2),
                                                    dict(code="class ModelNew: C", speedup=0.7, step=3)]}))
    fake, out = FakeBench(), str(tmp_path / "eval")
    _run(monkeypatch, capsys, fake, "--model=fake", f"--tasks_file={FIX}/eval_tasks.jsonl", "--device=cpu",
         "--baselines=eager", "--num_samples=2", "--prompt=contrastive", f"--db_file={db}", f"--eval_dir={out}")
    assert fake.calls[0] == ("many", 3, True)  # the format error never reaches bench
    p = seen["prompts"][0]  # top-2 by speedup, in that order
    assert "speedup 3.50x" in p and "speedup 1.20x" in p and "0.70x" not in p and p.index(": B") < p.index(": A")
    rows = {r["task"]: r for r in _lines(f"{out}/results.jsonl") if r["method"] == "model"}
    assert rows["level1/1_RowScale"]["speedup"] == 8.0 and "# FAST" in rows["level1/1_RowScale"]["code"]
    assert rows["level1/1_RowScale"]["num_correct"] == 2
    assert rows["level2/1_TanhScale"]["sample_status"] == ["format", "incorrect"]
    assert not rows["level2/1_TanhScale"]["success"]
    assert len(_lines(f"{out}/samples.jsonl")) == 4


# ---- the whole script through the real bench.py ---------------------------------------------------------------

def _bench_importable():
    if not os.path.exists(os.path.join(ROOT, "bench.py")):
        return False
    spec = importlib.util.spec_from_file_location("bench_probe", os.path.join(ROOT, "bench.py"))
    try:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
        return True
    except Exception:
        return False


@pytest.mark.skipif(not _bench_importable(), reason="bench.py not present yet")
def test_end_to_end_cpu_with_real_bench(tmp_path):
    out = str(tmp_path / "eval")
    cmd = [sys.executable, os.path.join(ROOT, "evaluate.py"), f"--kernels={FIX}/eval_kernels.jsonl",
           f"--tasks_file={FIX}/eval_tasks.jsonl", "--device=cpu", "--baselines=eager", f"--eval_dir={out}",
           "--timeout_s=120"]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    rows = {(r["task"], r["method"]): r for r in _lines(f"{out}/results.jsonl")}
    fast, wrong = rows[("level1/1_RowScale", "kernels")], rows[("level2/1_TanhScale", "kernels")]
    assert fast["success"] and fast["speedup"] > 1.0 and fast["status"] == "ok", fast
    assert not wrong["success"] and wrong["status"] == "incorrect", wrong
    assert rows[("level1/1_RowScale", "eager")]["ref_ms"] > 0
    line = next(x for x in p.stdout.splitlines() if x.startswith("| kernels | all |"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[2:4] == ["2", "1"]  # 2 tasks, 1 success
    assert math.isclose(float(cells[4]), (fast["speedup"] + 1.0) / 2, abs_tol=0.006)  # mean, the failure as 1.0
    assert cells[-4:] == ["0.50", "0.50", "0.50" if fast["speedup"] > 1.5 else "0.00", "0.50" if fast["speedup"] > 2 else "0.00"]
    n = len(_lines(f"{out}/results.jsonl"))
    p2 = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert p2.returncode == 0, p2.stdout + p2.stderr
    assert "resumed: 2 tasks already measured, 0 to go" in p2.stdout and "phase 1: 0 candidates" in p2.stdout
    assert len(_lines(f"{out}/results.jsonl")) == n  # nothing measured again
    assert line in p2.stdout
