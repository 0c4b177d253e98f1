"""Tests of evaluate.py on CPU: the statistics by hand, the kernels-file readers, the baseline modules, the whole
script with a fake bench (fast), and the whole script through the real bench.py."""
import json
import math
import os
import runpy
import shutil
import subprocess
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(ROOT, "tests", "fixtures")
sys.path.insert(0, ROOT)
from evaluation import baseline  # noqa: E402
from evaluation import measure  # noqa: E402
from evaluation import report  # noqa: E402
from evaluation import sampling  # noqa: E402
from evaluation import taskset  # noqa: E402

SAMPLE = os.path.join(os.environ.get("CUDAL1_SAMPLE_DIR") or os.path.join(ROOT, "..", "shared", "cudal1_sample"),
                      "a100_sample.jsonl")


# ---- summarize, checked by hand --------------------------------------------------------------------------------

def test_summarize_by_hand():
    s = report.summarize([2.0, None, 0.5, 1.0, 4.0])
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
    s = report.summarize([3.0, None, None, 1.5])  # padded, sorted: [1, 1, 1.5, 3]; positions 0.75, 1.5, 2.25
    assert s["p25"] == pytest.approx(1.0)
    assert s["median"] == pytest.approx(1.25)  # halfway between 1 and 1.5
    assert s["p75"] == pytest.approx(1.5 + 0.25 * 1.5)  # 1.875
    assert s["mean"] == pytest.approx(6.5 / 4) and s["mean_success"] == pytest.approx(2.25)


def test_summarize_empty_and_all_failures():
    e = report.summarize([])
    assert e["tasks"] == 0 and e["successes"] == 0 and e["count_gt_1_01"] == 0
    assert all(e[k] is None for k in ("mean", "mean_success", "median", "geomean", "max", "p25", "p75", "fast_0",
                                      "fast_2"))
    f = report.summarize([None, None, None])
    assert f["successes"] == 0 and f["mean_success"] is None
    assert f["mean"] == f["median"] == f["geomean"] == f["max"] == f["p25"] == f["p75"] == 1.0
    assert f["fast_0"] == f["fast_1"] == f["fast_2"] == 0.0


def test_summarize_treats_nonsense_as_failure():
    s = report.summarize([float("nan"), 0.0, -2.0, float("inf"), 2.0])
    assert s["successes"] == 1 and s["mean"] == pytest.approx(6 / 5)


def test_markdown_table_numbers():
    entries = [dict(method="kernels", level="level1", **report.summarize([2.0, None, 0.5, 1.0, 4.0])),
               dict(method="compile", level="all", **report.summarize([None]))]
    table = report.markdown_table(entries)
    lines = table.strip().splitlines()
    # the paper's layout first (mean, max, 75%, 50%, 25%, successes, > 1.01x), then the extra statistics
    assert lines[0] == ("| method | level | mean | max | p75 | p50 | p25 | ok | >1.01x | mean ok | geomean "
                        "| fast_0 | fast_1 | fast_1.5 | fast_2 |")
    assert len(lines) == 4
    assert lines[2] == ("| kernels | level1 | 1.70 | 4.00 | 2.00 | 1.00 | 1.00 | 4/5 | 2/5 | 1.88 | 1.32 "
                        "| 0.80 | 0.40 | 0.40 | 0.20 |")
    assert lines[3] == ("| compile | all | 1.00 | 1.00 | 1.00 | 1.00 | 1.00 | 0/1 | 0/1 | - | 1.00 | 0.00 | 0.00 "
                        "| 0.00 | 0.00 |")


def test_degenerate_sources():
    # the tasks_file field wins (a dict of screen results counts if any trivial output passed), then a screen,
    # then REFERENCE.md §3's list for KernelBench L1-L3 names (47 tasks), else unknown
    assert sum(len(v) for v in report.DEGENERATE_H200.values()) == 47
    assert report.degenerate_of(dict(name="level1/19_ReLU"), False, {}) == (True, "REFERENCE.md §3 (H200 scan)")
    assert report.degenerate_of(dict(name="level1/25_Swish"), False, {})[0] is False
    assert report.degenerate_of(dict(name="level3/47_X"), False, {})[0] is True
    assert report.degenerate_of(dict(name="level1/19_ReLU", degenerate=False), False, {}) == (False, "tasks_file")
    assert report.degenerate_of(dict(name="level1/25_Swish", degenerate={"zeros": False, "input": True}), False, {})[0]
    # a task timed against a reference that came with its kernel (CUDA-L1's v0 sizes, randn inputs): the list does
    # not apply; only a screen can tell
    assert report.degenerate_of(dict(name="level1/19_ReLU"), True, {}) == (None, "unknown")
    assert report.degenerate_of(dict(name="level1/19"), True, {"level1/19": False}) == \
        (False, "bench.degenerate_screen")
    assert report.degenerate_of(dict(name="tiny/relu"), False, {}) == (None, "unknown")


def test_kernel_mix_and_hack_counts():
    rows = [dict(success=True, custom_kernel_calls=3, cuda_source=True),
            dict(success=True, custom_kernel_calls=0, cuda_source=True),  # CUDA in the source, but it never ran
            dict(success=True, custom_kernel_calls=None, cuda_source=False),
            dict(success=False, custom_kernel_calls=5, cuda_source=True, hack="side_stream"),  # failed: not counted
            dict(success=True, custom_kernel_calls=0, cuda_source=False)]
    assert report.kernel_mix(rows) == dict(correct=4, custom_ran=1, pytorch_only=2, unknown=1, cuda_source=2)
    hk = [dict(hack="side_stream"), dict(hack=None, sample_hacks=[None, "backend_flags", "side_stream"]),
          dict(sample_hacks=["backend_flags"], hack="backend_flags"), dict()]
    assert report.hack_counts(hk) == {"backend_flags": 2, "side_stream": 2}


def test_interleave_levels():
    tasks = [dict(name=f"level{L}/{i}_t", level=L) for L, n in ((1, 3), (2, 1), (3, 2)) for i in range(1, n + 1)]
    assert [t["name"] for t in taskset.interleave(tasks)] == [
        "level1/1_t", "level2/1_t", "level3/1_t", "level1/2_t", "level3/2_t", "level1/3_t"]


def test_read_results_skips_a_line_cut_by_a_kill(tmp_path, capsys):
    p = tmp_path / "results.jsonl"
    p.write_text(json.dumps(dict(task="a", method="eager", ref_ms=1.0)) + "\n" +
                 json.dumps(dict(task="a", method="eager", ref_ms=2.0)) + "\n" + '{"task": "b", "meth')
    rows = measure.read_results(str(p))
    assert rows == {("a", "eager"): dict(task="a", method="eager", ref_ms=2.0)}  # the last row of a pair wins
    assert "unreadable line skipped" in capsys.readouterr().out
    import common
    common.append_jsonl(str(p), dict(task="b", method="eager", ref_ms=3.0))  # starts on a line of its own
    assert measure.read_results(str(p))[("b", "eager")]["ref_ms"] == 3.0


# ---- readers -----------------------------------------------------------------------------------------------------

@pytest.mark.skipif(not os.path.exists(SAMPLE), reason="CUDA-L1 sample not present")
def test_read_cudal1_sample():
    rows = taskset.read_kernels(SAMPLE)
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
    taskset.match_tasks(rows, tasks)
    assert [r["task"] for r in rows[:5]] == ["level1/5_Matrix_scalar_multiplication", "level1/25_Swish", "level1/32",
                                             "level1/88", "level2/48_Conv3d_Scaling"]


def test_read_cudal1_none_and_project_rows():
    rows = taskset.read_kernels(os.path.join(FIX, "eval_cudal1_none.jsonl"))
    assert [r["code"] for r in rows[:2]] == [None, None]  # the string "None" and null
    assert "ModelNew" in rows[2]["code"] and rows[2]["published"]["score_default"] == 42.0
    mine = taskset.read_kernels(os.path.join(FIX, "eval_kernels.jsonl"))
    assert [(r["task"], r["level"], r["task_id"], r["ref_code"]) for r in mine] == [
        ("level1/1_RowScale", 1, 1, None), ("level2/1_TanhScale", 2, 1, None)]


def test_load_tasks_from_kernelbench_dir(tmp_path, monkeypatch):
    task = "class Model: pass\ndef get_inputs(): return []\ndef get_init_inputs(): return []\n"
    (tmp_path / "level1").mkdir()
    (tmp_path / "level1" / "19_ReLU.py").write_text(task)
    (tmp_path / "level3").mkdir()
    (tmp_path / "level3" / "2_MLP.py").write_text(task + "y = 2\n")
    rows = sorted(taskset.read_task_set("", str(tmp_path), [1, 2, 3]), key=lambda r: r["name"])
    assert [(r["name"], r["level"], r["src"], r["split"]) for r in rows] == [
        ("level1/19_ReLU", 1, task, None), ("level3/2_MLP", 3, task + "y = 2\n", None)]
    assert taskset.read_task_set(str(tmp_path / "nope.jsonl"), "", [1]) is None
    # a file that is not a task is a clear error naming it
    (tmp_path / "level1" / "bad.py").write_text("x = 1\n")
    with pytest.raises(ValueError, match="bad.py: not a KernelBench task"):
        taskset.read_task_set("", str(tmp_path), [1, 2, 3])


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

    def fake_compile(fn, mode=None, **kw):  # inductor on 2 CPU cores takes ~90 s; dynamo's eager backend does not
        modes.append(mode)
        return real(fn, backend="eager")
    monkeypatch.setattr(torch, "compile", fake_compile)
    task = _tasks()[1]["src"]
    for name, mode in (("compile", None), ("compile_reduce_overhead", "reduce-overhead")):
        m, ns = _build(baseline.baseline_source(task, name), "ModelNew")
        r, _ = _build(task, "Model")
        assert isinstance(m, ns["Model"])  # same class, hence the same weights from the same seed
        x = ns["get_inputs"]()
        assert torch.allclose(m(*x), r(*x))
        assert modes[-1] == mode


def test_cuda_graph_and_cudnn_baselines_are_valid_modules():
    task = _tasks()[0]["src"]
    for name in ("cuda_graph", "cudnn_benchmark"):
        src = baseline.baseline_source(task, name)
        assert src.startswith(task.rstrip())
        ns = {}
        exec(compile(src, "<candidate>", "exec"), ns)  # defines the classes; running them needs a GPU
        assert issubclass(ns["ModelNew"], ns["Model"])
    ns = {}
    exec(compile(baseline.baseline_source(task, "cuda_graph"), "<c>", "exec"), ns)
    nested = (torch.ones(2), [torch.zeros(1), 3])
    out = ns["_clone_out"](nested)
    assert torch.equal(out[0], nested[0]) and out[0] is not nested[0] and out[1][1] == 3


# ---- the whole script with a fake bench ------------------------------------------------------------------------

class FakeBench:
    """Answers by looking at the candidate source; records every call."""
    def __init__(self, fail_many=False, interrupt_after=None, oom_in_many=False, oom_first_kernel=False):
        self.calls, self.fail_many, self.interrupt_after, self.kw = [], fail_many, interrupt_after, []
        self.oom_in_many = oom_in_many  # torch.compile baselines run out of GPU memory inside evaluate_many
        self.oom_first_kernel = oom_first_kernel  # the first candidate kernel does, inside evaluate_many

    def _one(self, cand, flags_override=None):
        if "sigmoid" in cand:
            return dict(status="incorrect", correct=False, compiled=True, speedup=None, ref_ms=1.0, error="mismatch")
        if "torch.compile" in cand and "for i in range" in cand:  # compile "fails" on the row-loop task
            return dict(status="runtime_error", correct=False, speedup=None, error="dynamo: graph break storm")
        if "__global__" in cand:
            return dict(status="hack", correct=True, speedup=9.0, ref_ms=1.0, cand_ms=1 / 9, hack="side_stream")
        speedup = (1.1 if flags_override else 1.5 if "torch.compile" in cand else 2.0 if "CUDAGraph" in cand
                   else 1.0 if "The reference itself" in cand else 8.0 if "# FAST" in cand else 4.0)
        return dict(status="ok", correct=True, speedup=speedup, ref_ms=1.0, cand_ms=1.0 / speedup, hack=None,
                    device_name="fake", protocol="strict", torch_version="9.9", cuda_version="99.0",
                    custom_kernel_calls=2 if "load_inline" in cand else 0)

    def evaluate_many(self, jobs, *, build_workers=None, progress=False, on_result=None, **kw):
        self.calls.append(("many", len(jobs), kw["static_checks"]))
        if self.fail_many:
            raise RuntimeError("pool died")
        out = []
        for i, (name, _, cand, *o) in enumerate(jobs):  # (task, task_src, cand_src[, per-job keywords])
            jkw = dict(kw, **(o[0] if o else {}))
            if not jkw["static_checks"]:  # the baselines: recorded one by one, as bench would run them
                self.calls.append(("job", name))
                self.kw.append(dict(jkw, flags_override=jkw.get("flags_override")))
                self._maybe_interrupt()
            out.append(self._one(cand, jkw.get("flags_override")))
            if (self.oom_in_many and "torch.compile" in cand) or (self.oom_first_kernel and jkw["static_checks"]
                                                                  and i == 0):
                out[-1] = dict(status="runtime_error", correct=False, speedup=None, error_type="OutOfMemoryError",
                               error="OutOfMemoryError: CUDA out of memory. Tried to allocate 64.00 GiB.")
            if on_result is not None:
                on_result(i, out[-1])
        return out

    def _maybe_interrupt(self):
        if self.interrupt_after is not None and sum(c[0] in ("one", "job") for c in self.calls) > self.interrupt_after:
            raise KeyboardInterrupt  # what Ctrl-C or evaluate's SIGTERM handler raises mid-run

    def evaluate(self, task_src, cand, *, task_name="task", flags_override=None, **kw):
        self.calls.append(("one", task_name, kw["static_checks"]))
        self.kw.append(dict(kw, flags_override=flags_override))
        self._maybe_interrupt()
        if "sigmoid" in cand:
            raise RuntimeError("segfault in the worker")
        return self._one(cand, flags_override)

    def degenerate_screen(self, task_src, *, task_name="task", **kw):
        self.calls.append(("screen", task_name))
        return dict(degenerate="# DEGENERATE" in task_src, status="ok", passed=[])


def _run(monkeypatch, capsys, fake, *args, code=None):
    """evaluate.py's main with a fake bench; code: the exit status expected (130 after an interrupt), None = none."""
    import signal
    monkeypatch.setitem(sys.modules, "bench", fake)
    monkeypatch.setattr(sys, "argv", ["evaluate.py", *args])
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)  # the script installs its own (common.exit_on_interrupt)
    term = signal.getsignal(signal.SIGTERM)
    try:
        runpy.run_path(os.path.join(ROOT, "evaluate.py"), run_name="__main__")
        assert code is None, f"expected exit status {code}"
    except SystemExit as e:
        if e.code != code or code is None:
            raise
    finally:
        signal.signal(signal.SIGTERM, term)
        baseline._WARM_STOP.clear()  # an interrupted run stops the warm-ups of this process; the next test's go on
    return capsys.readouterr().out


def _lines(path):
    return [json.loads(line) for line in open(path)]


def _csv(path):
    import csv
    head = next(csv.reader(open(path)))
    assert len(head) == len(set(head)), f"duplicate per_task.csv columns: {head}"
    return {r["task"]: r for r in csv.DictReader(open(path))}


def test_a_kernels_file_gets_its_own_eval_dir(tmp_path, monkeypatch, capsys):
    """--kernels=F without --eval_dir writes to out_dir/eval_<F's name>: checking a kernels file in the demo's run
    folder must not rewrite the demo's summary.md (whose before/after table would be lost)."""
    kern = tmp_path / "my kernels.jsonl"
    kern.write_text(open(os.path.join(FIX, "eval_kernels.jsonl")).read())
    os.makedirs(tmp_path / "eval")
    (tmp_path / "eval" / "summary.md").write_text("the demo's report\n")
    _run(monkeypatch, capsys, FakeBench(), f"--kernels={kern}", f"--tasks_file={FIX}/eval_tasks.jsonl",
         "--device=cpu", "--baselines=eager", f"--out_dir={tmp_path}", "--compile_workers=0")
    assert (tmp_path / "eval" / "summary.md").read_text() == "the demo's report\n"
    assert len(_lines(tmp_path / "eval_my_kernels" / "results.jsonl")) == 2 * 2  # kernels and eager, 2 tasks


def test_pipeline_with_fake_bench_and_resume(tmp_path, monkeypatch, capsys):
    fake, out = FakeBench(), str(tmp_path / "eval")
    args = [f"--kernels={FIX}/eval_kernels.jsonl", f"--tasks_file={FIX}/eval_tasks.jsonl", "--device=cpu",
            "--baselines=eager,compile,cuda_graph,cudnn_benchmark", f"--eval_dir={out}", "--compile_workers=0"]
    text = _run(monkeypatch, capsys, fake, *args)
    # the 2 kernels with static checks in one evaluate_many; the baselines a chunk (here 1 task) per evaluate_many,
    # static checks off (cuda_graph needs CUDA), levels interleaved; no degenerate screen (both names follow
    # REFERENCE.md §3's list)
    assert fake.calls == [("many", 2, True), ("many", 2, False), ("job", "level1/1_RowScale"),
                          ("job", "level1/1_RowScale"), ("many", 2, False), ("job", "level2/1_TanhScale"),
                          ("job", "level2/1_TanhScale")]
    assert [k["flags_override"] for k in fake.kw] == [None, {"cudnn_benchmark": True}] * 2
    assert "TORCHINDUCTOR_CACHE_DIR" in fake.kw[0]["extra_env"] and "extra_env" not in fake.kw[1]
    rows = {(r["task"], r["method"]): r for r in _lines(f"{out}/results.jsonl")}
    assert len(rows) == 2 * 4
    assert rows[("level1/1_RowScale", "kernels")]["speedup"] == 4.0
    assert rows[("level2/1_TanhScale", "kernels")]["status"] == "incorrect"
    assert rows[("level2/1_TanhScale", "kernels")]["speedup"] is None
    assert rows[("level1/1_RowScale", "eager")]["speedup"] == 1.0
    assert rows[("level1/1_RowScale", "eager")]["ref_ms"] == 1.0
    # kernels over both tasks: [4.0, fail] -> padded [4, 1]: mean 2.5, max 4, p75 3.25, p50 2.5, p25 1.75, 1 of 2 ok
    # and > 1.01x, mean ok 4, geomean 2, fast_p 0.5 for every p
    kern_all = ("| kernels | all | 2.50 | 4.00 | 3.25 | 2.50 | 1.75 | 1/2 | 1/2 | 4.00 | 2.00 | 0.50 | 0.50 | 0.50 "
                "| 0.50 |")
    assert kern_all in text
    assert "| kernels | level2 | 1.00 | 1.00 | 1.00 | 1.00 | 1.00 | 0/1 | 0/1 | - |" in text
    assert "| compile | all | 1.25 | 1.50 |" in text  # [fail, 1.5]
    assert "| cudnn_benchmark | all | 1.10 | 1.10 | 1.10 | 1.10 | 1.10 | 2/2 | 2/2 |" in text
    assert "| kernels vs compile | level1 | 4.00 |" in text  # compile failed there: compared with eager
    assert "| kernels vs compile | level2 | 1.00 |" in text
    assert "| kernels vs cudnn_benchmark | all | 2.32 |" in text  # [4.0 / 1.1, fail] -> (3.636 + 1) / 2
    assert "cuda_graph: unavailable (needs a CUDA device)" in text and "| cuda_graph |" not in text
    # no degenerate task among these two: the second table equals the first
    assert text.count(kern_all) == 2 and "### without degenerate tasks" in text
    assert "| all | 1 | 0 | 1 | 0 | 0 | 0% |" in text  # 1 correct kernel, PyTorch only (custom_kernel_calls 0)
    assert "hacks named by bench, by kind: none" in text
    # kernels per minute: the kernels (2), not the rows they make (with the baselines' 6)
    assert "; 2 distinct kernels measured by this run, " in text and " per minute " in text, text
    assert "phase 1: 2 answers of 2 tasks, 2 distinct kernels, each timed once (0 tasks already measured)" in text
    summary = json.load(open(f"{out}/summary.json"))
    assert summary["unavailable"] == {"cuda_graph": "needs a CUDA device"} and summary["config"]["device"] == "cpu"
    assert summary["env"]["torch_version"] == "9.9" and "--baselines=" in summary["env"]["commands"][0]
    assert summary["missing"] == []
    assert summary["degenerate"] == {"level1/1_RowScale": False, "level2/1_TanhScale": False}
    md = open(f"{out}/summary.md").read()
    assert kern_all in md and "torch 9.9, CUDA 99.0" in md
    table = _csv(f"{out}/per_task.csv")
    row_scale, tanh_scale = table["level1/1_RowScale"], table["level2/1_TanhScale"]
    assert row_scale["kernels_speedup"] == "4.0" and row_scale["compile_status"] == "runtime_error"
    assert tanh_scale["kernels_speedup"] == "" and tanh_scale["compile_speedup"] == "1.5"
    assert tanh_scale["eager_ms"] == "1.0" and row_scale["kernels_custom_kernel_calls"] == "0"
    assert row_scale["degenerate"] == "False" and tanh_scale["cudnn_benchmark_ms"] != ""
    assert float(table["level1/1_RowScale"]["kernels vs cudnn_benchmark"]) == pytest.approx(4.0 / 1.1)
    assert os.path.getsize(f"{out}/speedup_sorted.png") > 0 and os.path.getsize(f"{out}/speedup_vs_baselines.png") > 0
    # rerun: everything is in results.jsonl, so bench is not called and no row is added
    n, ncalls = len(_lines(f"{out}/results.jsonl")), len(fake.calls)
    text2 = _run(monkeypatch, capsys, fake, *args)
    assert len(fake.calls) == ncalls and len(_lines(f"{out}/results.jsonl")) == n
    assert "phase 1: 0 answers of 0 tasks, 0 distinct kernels, each timed once (2 tasks already measured)" in text2
    assert kern_all in text2
    assert "; 0 distinct kernels measured by this run, 0.0 per minute" in text2
    assert text2.count("Command: `") == 1, text2      # the rerun's command equals the first: named once
    text3 = _run(monkeypatch, capsys, fake, *args, "--summarize_only=True")
    assert len(fake.calls) == ncalls and kern_all in text3
    assert len(_lines(f"{out}/runs.jsonl")) == 2  # the two measuring runs are named; the re-summary is not
    commands = [r["command"] for r in _lines(f"{out}/runs.jsonl")]
    assert json.load(open(f"{out}/summary.json"))["env"]["commands"] == commands


def test_without_degenerate_rows_and_hacks(tmp_path, monkeypatch, capsys):
    # three level-1 tasks; the second is marked degenerate by the tasks file; its kernel is the fastest
    src = _tasks()[1]["src"]
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(dict(name=f"level1/{i}_T", level=1, src=src, split="eval", degenerate=d)) + "\n"
                             for i, d in ((1, False), (2, True), (3, False))))
    code = [json.loads(line)["code"] for line in open(os.path.join(FIX, "eval_kernels.jsonl"))][1]
    code = code.replace("sigmoid", "tanh")
    kern = tmp_path / "k.jsonl"
    kern.write_text("".join(json.dumps(dict(task=f"level1/{i}_T", code=c)) + "\n" for i, c in (
        (1, code), (2, code + "# FAST\n"), (3, code + "# load_inline\n"), (3, code + "// __global__\n"))))
    fake = FakeBench()
    text = _run(monkeypatch, capsys, fake, f"--kernels={kern}", f"--tasks_file={tasks}", "--device=cpu",
                "--baselines=eager", f"--eval_dir={tmp_path}/e", "--compile_workers=0")
    # all: [4, 8, 4] -> mean 5.33, max 8; without task 2: [4, 4]; task 3 has two samples: best of 2 is the correct
    # one (the other is a "side_stream" hack with a 9x measurement, which counts as a failure)
    assert "| kernels | level1 | 5.33 | 8.00 | 6.00 | 4.00 | 4.00 | 3/3 | 3/3 | 5.33 |" in text
    wo = text[text.index("### without degenerate tasks"):]
    assert "| kernels | level1 | 4.00 | 4.00 | 4.00 | 4.00 | 4.00 | 2/2 | 2/2 | 4.00 |" in wo
    assert "| level1 | 3 | 1 | 2 | 0 | 1 | 33% |" in text  # task 3's kernel called load_inline; its CUDA source counts
    assert "kernels: side_stream 1" in text
    assert "Degenerate tasks (REFERENCE.md §3): 1 of the measured; sources: tasks_file 3" in text
    assert json.load(open(f"{tmp_path}/e/summary.json"))["hacks"]["kernels"] == {"side_stream": 1}


def test_baselines_only_and_interrupt(tmp_path, monkeypatch, capsys):
    out = str(tmp_path / "b")
    args = [f"--tasks_file={FIX}/eval_tasks.jsonl", "--device=cpu", "--baselines=eager,compile,cudnn_benchmark",
            f"--eval_dir={out}", "--compile_workers=0"]
    fake = FakeBench(interrupt_after=3)  # the 4th timed run is "interrupted": level2's cudnn_benchmark
    text = _run(monkeypatch, capsys, fake, *args, code=130)  # the report, then exit status 130
    assert "interrupted" in text and fake.calls[:2] == [("many", 2, False), ("job", "level1/1_RowScale")]
    assert "Measured 1 of 2 selected tasks; missing (1): level2/1_TanhScale" in text
    assert ("- eager: 1 of 2 tasks, missing 1\n- compile: 2 of 2 tasks\n- cudnn_benchmark: 1 of 2 tasks, missing 1"
            in text)
    # each method over the tasks it has rows for: compile failed on task 1 and has task 2 (1.5x)
    assert "| compile | level1 | 1.00 | 1.00 |" in text and "| compile | all | 1.25 | 1.50 |" in text
    assert "| eager | all | 1.00 | 1.00 | 1.00 | 1.00 | 1.00 | 1/1 |" in text and "| eager | level2 | - |" in text
    assert "| cudnn_benchmark | all | 1.10 | 1.10 | 1.10 | 1.10 | 1.10 | 1/1 |" in text and "| kernels" not in text
    assert [r["method"] for r in _lines(f"{out}/results.jsonl")] == ["compile", "cudnn_benchmark", "eager", "compile"]
    fake = FakeBench()
    text = _run(monkeypatch, capsys, fake, *args)  # continues with the one missing run
    assert fake.calls == [("many", 1, False), ("job", "level2/1_TanhScale")]
    assert "Measured 2 of 2 selected tasks." in text and "| compile | all | 1.25 | 1.50 |" in text
    assert _csv(f"{out}/per_task.csv")["level2/1_TanhScale"]["compile_speedup"] == "1.5"


def test_oom_result_is_run_again_alone(tmp_path, monkeypatch, capsys):
    """A baseline that ran out of GPU memory inside evaluate_many (other children and warm-ups on the GPU) is run
    again alone with bench.evaluate; its second result is the row that counts."""
    out = str(tmp_path / "o")
    fake = FakeBench(oom_in_many=True)
    text = _run(monkeypatch, capsys, fake, f"--tasks_file={FIX}/eval_tasks.jsonl", "--device=cpu",
                "--baselines=eager,compile,cudnn_benchmark", f"--eval_dir={out}", "--compile_workers=0")
    assert [c for c in fake.calls if c[0] == "one"] == [("one", "level1/1_RowScale", False),
                                                         ("one", "level2/1_TanhScale", False)]
    assert "level2/1_TanhScale: out of GPU memory beside other processes; alone: ok" in text
    lines = [r for r in _lines(f"{out}/results.jsonl") if r["method"] == "compile"]
    assert [r["status"] for r in lines] == ["runtime_error", "runtime_error", "runtime_error", "ok"]
    assert lines[-1]["retried_after_oom"] and "| compile | all | 1.25 | 1.50 |" in text  # [graph-break fail, 1.5]


def test_kernels_in_one_batch_and_an_oom_kernel_written_once_after_its_retry(tmp_path, monkeypatch, capsys):
    """Phase 1 measures every candidate in ONE evaluate_many call (so that no chunk of tasks waits for its slowest
    failing build), writes each task's row as its last kernel finishes, and a kernel that ran out of GPU memory
    there is written once, with the result of its run alone (an OOM row first would be the one a rerun reuses)."""
    out = str(tmp_path / "eval")
    fake = FakeBench(oom_first_kernel=True)
    _run(monkeypatch, capsys, fake, f"--kernels={FIX}/eval_kernels.jsonl", f"--tasks_file={FIX}/eval_tasks.jsonl",
         "--device=cpu", "--baselines=eager", f"--eval_dir={out}", "--compile_workers=0")
    assert [c for c in fake.calls if c[0] == "many" and c[2]] == [("many", 2, True)]
    assert [c for c in fake.calls if c[0] == "one" and c[2]] == [("one", "level1/1_RowScale", True)]
    kern = _lines(f"{out}/kernels.jsonl")
    assert len(kern) == 2 and [k["result"]["status"] for k in kern] == ["incorrect", "ok"], kern
    assert kern[1]["result"]["retried_after_oom"]
    rows = [r for r in _lines(f"{out}/results.jsonl") if r["method"] == "kernels"]
    assert sorted((r["task"], r["status"]) for r in rows) == [("level1/1_RowScale", "ok"),
                                                             ("level2/1_TanhScale", "incorrect")]


def test_partial_run_still_reports_the_kernels(tmp_path, monkeypatch, capsys):
    """A run stopped in phase 2 (say by `timeout` during the compile warm-up) has every kernels row
    and no baseline row: the kernels table must still be there, and each method says how many tasks it misses."""
    out = str(tmp_path / "eval")
    args = [f"--kernels={FIX}/eval_kernels.jsonl", f"--tasks_file={FIX}/eval_tasks.jsonl", "--device=cpu",
            "--baselines=eager,compile,cudnn_benchmark", f"--eval_dir={out}", "--compile_workers=0"]
    fake = FakeBench(interrupt_after=0)  # the first baseline run is "interrupted"
    text = _run(monkeypatch, capsys, fake, *args, code=130)
    assert "interrupted" in text and [r["method"] for r in _lines(f"{out}/results.jsonl")] == ["kernels"] * 2
    assert "Measured 0 of 2 selected tasks; missing (2)" in text
    assert "- kernels: 2 of 2 tasks\n- eager: 0 of 2 tasks, missing 2\n- compile: 0 of 2 tasks, missing 2" in text
    kern_all = ("| kernels | all | 2.50 | 4.00 | 3.25 | 2.50 | 1.75 | 1/2 | 1/2 | 4.00 | 2.00 | 0.50 | 0.50 | 0.50 "
                "| 0.50 |")
    assert text.count(kern_all) == 2  # both tables (neither task is degenerate)
    assert "| compile | all | - | - | - | - | - | 0/0 | 0/0 |" in text
    assert "| kernels vs compile | all | - | - | - | - | - | 0/0 |" in text  # no compile row: no ratio, not a failure
    assert "| all | 1 | 0 | 1 | 0 | 0 | 0% |" in text  # the kernel mix covers the kernels rows too
    summary = json.load(open(f"{out}/summary.json"))
    assert summary["measured"] == 0 and summary["measured_by_method"] == {"kernels": 2, "eager": 0, "compile": 0,
                                                                          "cudnn_benchmark": 0}
    assert _csv(f"{out}/per_task.csv")["level1/1_RowScale"]["kernels_speedup"] == "4.0"
    text2 = _run(monkeypatch, capsys, FakeBench(), *args, "--summarize_only=True")
    assert text2.count(kern_all) == 2 and "Measured 0 of 2" in text2


COMMITTED = os.path.join(ROOT, "results", "h200_baselines")
KB_DIR = next((d for d in (os.environ.get("KERNELBENCH_DIR"), os.path.join(ROOT, "..", "shared", "kernelbench"))
               if d and os.path.isdir(d)), None)


@pytest.mark.skipif(not (KB_DIR and os.path.exists(os.path.join(COMMITTED, "results.jsonl"))),
                    reason="KernelBench or the committed H200 run not present")
def test_summarize_only_reproduces_the_committed_h200_table(tmp_path, monkeypatch, capsys):
    """--summarize_only=True on the committed (stopped) H200 baselines run rebuilds, from its results.jsonl alone,
    exactly the tables of its committed summary.md, measuring nothing and leaving results.jsonl as it was."""
    for f in ("results.jsonl", "runs.jsonl"):
        shutil.copy(os.path.join(COMMITTED, f), tmp_path / f)
    fake = FakeBench()
    text = _run(monkeypatch, capsys, fake, f"--kernelbench_dir={KB_DIR}", "--levels=1,2,3", f"--eval_dir={tmp_path}",
                "--summarize_only=True", "--baselines=eager,compile,compile_reduce_overhead,cuda_graph")
    assert fake.calls == []  # nothing measured
    committed = [line for line in open(os.path.join(COMMITTED, "summary.md")).read().splitlines()
                 if line.startswith("| ")]
    assert len(committed) > 30 and [line for line in text.splitlines() if line.startswith("| ")] == committed
    assert "Measured 32 of 250 selected tasks" in text
    assert open(tmp_path / "results.jsonl").read() == open(os.path.join(COMMITTED, "results.jsonl")).read()


def test_warm_failure_names_the_cause():
    assert baseline.warm_failure(-15, "warm: imports 9.0 s, build + 2 calls 13.5 s\n") == \
        "killed by SIGTERM after 'warm: imports 9.0 s, build + 2 calls 13.5 s'"
    tb = ('Traceback (most recent call last):\n  File "x.py", line 1\nValueError: bad shape\n'
          'warm-up error: ValueError: bad shape\n')
    assert baseline.warm_failure(1, tb) == "exit status 1: warm-up error: ValueError: bad shape"
    assert baseline.warm_failure(1, "W1129 some warning\nRuntimeError: boom\nprinted after\n") == \
        "exit status 1: RuntimeError: boom"  # the last error line, not the last line
    assert baseline.warm_failure(3, "") == "exit status 3: no output"


def test_warm_reports_the_workers_error_cpu(tmp_path, monkeypatch, capsys):
    """A real warm-up worker whose task raises: warm counts it failed and prints the worker's error, not a timing."""
    task = _tasks()[0]["src"] + "\n\ndef get_inputs():\n    raise RuntimeError('no inputs today')\n"
    assert baseline.warm([("level1/x", task, baseline.baseline_source(task, "compile"))], "cpu", 1, 300.0,
                         str(tmp_path / "c")) == {"failed": 1}
    out = capsys.readouterr()
    assert "warm-up of level1/x failed (bench will compile it): exit status 1: warm-up error: RuntimeError: no " \
           "inputs today" in out.out + out.err


def _cudal1_ref(level, task_id):
    return next(r["ref_code"] for r in map(json.loads, open(SAMPLE))
                if (r["level_id"], r["task_id"]) == (level, task_id))


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists(SAMPLE), reason="CUDA-L1 sample not present")
def test_warm_cudal1_ref_code_with_float_input_cpu(tmp_path, monkeypatch):
    """CUDA-L1's level1/5 reference (inputs made on the CPU, a python float `s = 3.14` as the second input; sizes
    cut for a CPU) goes through the warm path for both compile baselines and fills the cache."""
    try:
        from torch._inductor.cpp_builder import get_cpp_compiler
        get_cpp_compiler()
    except Exception as e:
        pytest.skip(f"no inductor C++ compiler: {e}")
    ref = _cudal1_ref(1, 5).replace("M = 16384", "M = 256").replace("N = 4096", "N = 128")
    assert "s = 3.14" in ref and "M = 256" in ref
    assert baseline.warm([("level1/5", ref, baseline.baseline_source(ref, b)) for b in baseline.COMPILED], "cpu", 2,
                         600.0, str(tmp_path / "c")) == {"ok": 2}
    assert _fx_files(str(tmp_path / "c"))


@pytest.mark.gpu
@pytest.mark.skipif(not os.path.exists(SAMPLE), reason="CUDA-L1 sample not present")
def test_warm_cudal1_ref_codes_gpu(tmp_path, monkeypatch, capsys):
    """All 7 CUDA-L1 sample references, both compile baselines, through the warm path on the GPU: every one ok."""
    jobs = [(f"level{r['level_id']}/{r['task_id']}", r["ref_code"]) for r in map(json.loads, open(SAMPLE))]
    st = baseline.warm([(n, ref, baseline.baseline_source(ref, b)) for n, ref in jobs for b in baseline.COMPILED],
                       "cuda",
                       8, 600.0, str(tmp_path / "c"))
    assert st == {"ok": 14}, capsys.readouterr().out


def test_pipeline_survives_a_failing_bench(tmp_path, monkeypatch, capsys):
    fake, out = FakeBench(fail_many=True), str(tmp_path / "eval")
    text = _run(monkeypatch, capsys, fake, f"--kernels={FIX}/eval_kernels.jsonl",
                f"--tasks_file={FIX}/eval_tasks.jsonl",
                "--device=cpu", "--baselines=eager", f"--eval_dir={out}")
    assert ("one", "level2/1_TanhScale", True) in fake.calls  # fell back to one evaluate per job
    rows = {r["task"]: r for r in _lines(f"{out}/results.jsonl") if r["method"] == "kernels"}
    assert rows["level2/1_TanhScale"]["status"] == "crash" and "segfault" in rows["level2/1_TanhScale"]["error"]
    assert rows["level1/1_RowScale"]["speedup"] == 4.0
    assert "| kernels | all | 2.50 |" in text


def test_pipeline_cudal1_file_without_task_set(tmp_path, monkeypatch, capsys):
    fake, out = FakeBench(), str(tmp_path / "eval")
    text = _run(monkeypatch, capsys, fake, f"--kernels={FIX}/eval_cudal1_none.jsonl", "--tasks_file=/nonexistent.jsonl",
                "--device=cpu", "--baselines=eager", f"--eval_dir={out}", "--screen_degenerate=True")
    # the two lines without a kernel are not sent to bench; their references are then timed against themselves, both
    # in ONE evaluate_many, static checks off (one by one, each is timed twice: as reference and as candidate); the
    # tasks carry their own references, so bench's degenerate screen decides (REFERENCE.md §3's list does not apply)
    assert fake.calls == [("many", 1, True), ("screen", "level1/1"), ("screen", "level1/2"), ("screen", "level1/3"),
                          ("many", 2, False), ("job", "level1/1"), ("job", "level1/2")]
    assert [k.get("reference_only") for k in fake.kw] == [True, True]   # timed alone, not against itself
    eager = {r["task"]: r for r in _lines(f"{out}/results.jsonl") if r["method"] == "eager"}
    assert [eager[f"level1/{i}"]["ref_ms"] for i in (1, 2, 3)] == [1.0, 1.0, 1.0]
    assert [eager[f"level1/{i}"]["speedup"] for i in (1, 2, 3)] == [1.0, 1.0, 1.0]
    rows = {r["task"]: r for r in _lines(f"{out}/results.jsonl") if r["method"] == "kernels"}
    assert [rows[f"level1/{i}"]["status"] for i in (1, 2, 3)] == ["missing", "missing", "ok"]
    assert rows["level1/3"]["published"]["score_default"] == 42.0
    assert "| kernels | level1 | 2.00 | 4.00 |" in text  # [fail, fail, 4.0] -> (1 + 1 + 4) / 3
    assert "| published | level1 | 14.67 | 42.00 |" in text  # score 0.0 is no kernel: (1 + 1 + 42) / 3
    assert "bench.degenerate_screen 3" in text
    assert _csv(f"{out}/per_task.csv")["level1/3"]["published_score_default"] == "42.0"


def test_pipeline_filters(tmp_path, monkeypatch, capsys):
    fake = FakeBench()
    text = _run(monkeypatch, capsys, fake, f"--kernels={FIX}/eval_kernels.jsonl",
                f"--tasks_file={FIX}/eval_tasks.jsonl",
                "--device=cpu", "--baselines=eager", "--split=eval", f"--eval_dir={tmp_path}/a")
    assert "| kernels | all | 4.00 |" in text and "| level2 |" not in text
    text = _run(monkeypatch, capsys, fake, f"--kernels={FIX}/eval_kernels.jsonl",
                f"--tasks_file={FIX}/eval_tasks.jsonl",
                "--device=cpu", "--baselines=eager", "--levels=2", f"--eval_dir={tmp_path}/b")
    assert "| kernels | all | 1.00 |" in text
    with pytest.raises(SystemExit):
        _run(monkeypatch, capsys, fake, f"--kernels={FIX}/eval_kernels.jsonl", "--baselines=eager,fast", "--device=cpu")
    with pytest.raises(SystemExit, match="at most one"):
        _run(monkeypatch, capsys, fake, f"--kernels={FIX}/eval_kernels.jsonl", "--model=x", "--device=cpu")


def test_pipeline_with_a_model(tmp_path, monkeypatch, capsys):
    import prompting
    tasks, kern = _tasks(), [json.loads(line)["code"] for line in open(os.path.join(FIX, "eval_kernels.jsonl"))]
    answers = {  # two samples per task: best of 2 is the faster correct one; a format error is a failed sample
        "level1/1_RowScale": [prompting.format_response("a", "d", kern[0]),
                              prompting.format_response("a", "d", kern[0] + "# FAST\n")],
        "level2/1_TanhScale": ["no sections at all", prompting.format_response("a", "d", kern[1])]}
    seen = {}

    def fake_generate(model, tok, prompts, num_generations, max_new_tokens, temperature=1.0, **kw):
        seen["prompts"] = prompts
        for p in prompts:
            name = next(t["name"] for t in tasks if t["src"].strip() in p)
            for text in answers[name][:num_generations]:
                yield dict(prompt_ids=[], completion_ids=[], truncated=False, text=text)
    monkeypatch.setattr(sampling, "load_model", lambda name, device="cpu", dtype="float32": (None, None))
    monkeypatch.setattr(sampling, "generate", fake_generate)
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
    assert fast["custom_kernel_calls"] == 0 and fast["cuda_source"] is False  # a PyTorch-only rewrite
    assert rows[("level1/1_RowScale", "eager")]["ref_ms"] > 0
    line = next(x for x in p.stdout.splitlines() if x.startswith("| kernels | all |"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[7:9] == ["1/2", "1/2"]  # 1 success of 2 tasks, and it is faster than 1.01x
    assert math.isclose(float(cells[2]), (fast["speedup"] + 1.0) / 2, abs_tol=0.006)  # mean, the failure as 1.0
    assert cells[-4:] == ["0.50", "0.50", "0.50" if fast["speedup"] > 1.5 else "0.00",
                          "0.50" if fast["speedup"] > 2 else "0.00"]
    assert "| all | 1 | 0 | 1 | 0 | 0 | 0% |" in p.stdout  # PyTorch only
    n = len(_lines(f"{out}/results.jsonl"))
    p2 = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert p2.returncode == 0, p2.stdout + p2.stderr
    assert "phase 1: 0 answers of 0 tasks, 0 distinct kernels, each timed once (2 tasks already measured)" in p2.stdout
    assert len(_lines(f"{out}/results.jsonl")) == n  # nothing measured again
    assert line in p2.stdout


def test_baselines_only_cpu_with_real_bench(tmp_path):
    """No kernels: the baselines table alone, through the real bench (cudnn_benchmark via flags_override)."""
    out = str(tmp_path / "b")
    cmd = [sys.executable, os.path.join(ROOT, "evaluate.py"), f"--tasks_file={FIX}/eval_tasks.jsonl", "--device=cpu",
           "--task_names=level2/1_TanhScale", "--baselines=eager,cudnn_benchmark", f"--eval_dir={out}",
           "--time_budget_s=0.2", "--num_correct_trials=2", "--timeout_s=120"]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    rows = {r["method"]: r for r in _lines(f"{out}/results.jsonl")}
    assert set(rows) == {"cudnn_benchmark", "eager"}
    cb = rows["cudnn_benchmark"]
    assert cb["status"] == "ok" and cb["flags_override"] == {"cudnn_benchmark": True}, cb
    assert 0.3 < cb["speedup"] < 3  # the same module on CPU: about 1x (a loaded 2-core box is noisy)
    assert rows["eager"]["ref_ms"] == pytest.approx(cb["ref_ms"])  # eager's time = the median ref_ms of its runs
    assert "Measured 1 of 1 selected tasks." in p.stdout and "| cudnn_benchmark | level2 |" in p.stdout
    assert "Degenerate tasks (REFERENCE.md §3): 0 of the measured; sources: REFERENCE.md §3 (H200 scan) 1" in p.stdout
    summary = json.load(open(f"{out}/summary.json"))
    assert summary["env"]["torch_version"] == torch.__version__ and summary["measured"] == 1
    assert os.path.getsize(f"{out}/per_task.csv") > 0 and os.path.exists(f"{out}/speedup_vs_baselines.png")


def _fx_files(cache):
    root = os.path.join(cache, "fxgraph")
    return {os.path.join(d, f): os.stat(os.path.join(d, f)).st_mtime_ns for d, _, fs in os.walk(root) for f in fs}


@pytest.mark.slow
def test_compile_warm_cache_is_used_cpu(tmp_path, monkeypatch):
    """The shared compile cache on CPU (inductor's C++ backend): evaluate's warm-up worker fills it; bench's timed
    child, given that cache through extra_env, finds the compiled graph there: it neither adds nor rewrites an FX
    graph entry. Control: the same child given a cache directory without FX graph entries compiles the graph into it
    (so it does use the dir). That directory holds the warm one's C++ kernels, which inductor finds by their source
    and does not build again (one g++ compile, ~10 s of CPU, fewer); the FX graph entry is made all the same."""
    try:
        from torch._inductor.cpp_builder import get_cpp_compiler
        get_cpp_compiler()
    except Exception as e:
        pytest.skip(f"no inductor C++ compiler: {e}")
    import bench
    task = _tasks()[1]["src"]
    cand = baseline.baseline_source(task, "compile")
    kw = dict(device="cpu", static_checks=False, time_budget_s=0.2, num_correct_trials=2, timeout_s=600)
    assert baseline.warm([("level2/1_TanhScale", task, cand)], "cpu", 1, 600.0, str(tmp_path / "warm")) == {"ok": 1}
    before = _fx_files(str(tmp_path / "warm"))
    assert before  # the worker compiled the graph into the shared cache
    hit = bench.evaluate(task, cand, extra_env=baseline.cache_env(str(tmp_path / "warm")), **kw)
    assert hit["status"] == "ok", hit
    assert _fx_files(str(tmp_path / "warm")) == before  # found, not compiled again
    shutil.copytree(tmp_path / "warm", tmp_path / "cold",      # the kernels, without the graphs that would be hits
                    ignore=lambda d, names: [n for n in names if d == str(tmp_path / "warm") and
                                             n in ("fxgraph", "aotautograd")])
    assert _fx_files(str(tmp_path / "warm")) and not _fx_files(str(tmp_path / "cold"))
    cold = bench.evaluate(task, cand, extra_env=baseline.cache_env(str(tmp_path / "cold")), **kw)
    assert cold["status"] == "ok", cold
    assert len(_fx_files(str(tmp_path / "cold"))) == len(before)  # the control compiled the same graph itself
    print(f"bench eval_s: warm cache {hit['eval_s']:.1f} s, cold cache {cold['eval_s']:.1f} s")


@pytest.mark.gpu
def test_all_baselines_gpu(tmp_path):
    """Every baseline on one small task on the GPU: the warm-up workers, the shared compile cache, the CUDA-graph
    capture, reduce-overhead and cudnn.benchmark through bench's flags_override all give correct, timed results."""
    out, cache = str(tmp_path / "g"), str(tmp_path / "cache")
    cmd = [sys.executable, os.path.join(ROOT, "evaluate.py"), f"--tasks_file={FIX}/eval_tasks.jsonl", "--device=cuda",
           "--task_names=level2/1_TanhScale", f"--eval_dir={out}", "--compile_workers=2", f"--inductor_cache={cache}",
           "--baselines=eager,compile,compile_reduce_overhead,cuda_graph,cudnn_benchmark", "--timeout_s=300"]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "warm-up of 2 compile baselines: {'ok': 2}" in p.stdout + p.stderr, p.stdout + p.stderr
    rows = {r["method"]: r for r in _lines(f"{out}/results.jsonl")}
    for b in ("compile", "compile_reduce_overhead", "cuda_graph", "cudnn_benchmark"):
        assert rows[b]["status"] == "ok" and rows[b]["speedup"] > 0, (b, rows[b]["status"], rows[b].get("error"))
    assert rows["cudnn_benchmark"]["flags_override"] == {"cudnn_benchmark": True}
    assert _fx_files(cache) and "Measured 1 of 1 selected tasks." in p.stdout
    assert "NVIDIA" in open(f"{out}/summary.md").read()  # the GPU named with the versions


def test_split_without_a_prepared_task_file_says_which_file(monkeypatch, capsys, tmp_path):
    # a newcomer's `--model=... --split=eval` on a demo's output without its --out_dir: KernelBench's tasks have no
    # split, and the file that would have one does not exist; nothing is recorded as a run
    out = tmp_path / "o"
    kb = tmp_path / "kb" / "level1"
    kb.mkdir(parents=True)
    (kb / "1_X.py").write_text("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
                               "        return x\ndef get_inputs():\n    return [torch.ones(2)]\n"
                               "def get_init_inputs():\n    return []\n")
    with pytest.raises(SystemExit) as e:
        _run(monkeypatch, capsys, FakeBench(), f"--out_dir={out}", f"--kernelbench_dir={tmp_path / 'kb'}",
             "--split=eval", "--baselines=eager", "--device=cpu", code=-1)
    msg = str(e.value.code)
    assert f"{out}/tasks.jsonl, which does not exist" in msg and "--split=all" in msg, msg
    assert not (out / "eval" / "runs.jsonl").exists()
