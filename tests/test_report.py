"""evaluate.py's report (evaluation/report.py): per_task.csv has each column once, speedup_sorted.png is
legible for 3 tasks and for 250 (integer task ranks, no duplicate panel), the header names the real torch and CUDA
versions even for a run stopped before its first measurement, and the per-sample statistics by hand."""
import csv
import math

import pytest
import torch

from evaluation import report


def _rows(names, methods):
    rows = {}
    for i, n in enumerate(names):
        for m in methods:
            ok = (i + len(m)) % 4 != 0
            rows[(n, m)] = dict(task=n, method=m, status="ok" if ok else "incorrect", success=ok,
                                speedup=(1.0 if m == "eager" else 0.5 + (i % 7) / 3) if ok else None,
                                ref_ms=1.0, cand_ms=0.5, sample_speedups=[1.5, None] if m == "after_rl" else None)
    return rows


def test_per_task_csv_has_unique_columns(tmp_path):
    names = ["level1/1_A", "level1/2_B", "level2/3_C"]
    tasks = [dict(name=n, level=int(n[5])) for n in names]
    methods = ["before_rl", "after_rl", "eager", "compile"]
    rows = _rows(names, methods)
    ratios = {"after_rl vs compile": {n: 1.0 for n in names}, "before_rl vs compile": {}}
    report.write_csv(tmp_path / "t.csv", tasks, {n: False for n in names}, rows, methods, ["before_rl", "after_rl"],
                     ratios)
    head = next(csv.reader(open(tmp_path / "t.csv")))
    assert len(head) == len(set(head)), head
    assert head.count("eager_ms") == 1 and "after_rl_mean_sample_speedup" in head and "after_rl vs compile" in head
    table = {r["task"]: r for r in csv.DictReader(open(tmp_path / "t.csv"))}
    assert table["level1/2_B"]["after_rl_mean_sample_speedup"] == "0.75"  # [1.5, failed as 0] by hand
    with pytest.raises(AssertionError, match="duplicate"):
        report.csv_header(["eager", "eager"], [], [], {})


def _ticks_are_whole(ax):
    lo, hi = ax.get_xlim()
    ticks = [t for t in ax.get_xticks() if lo <= t <= hi]
    return ticks and all(float(t).is_integer() for t in ticks), ticks


@pytest.mark.parametrize("n_tasks,levels,panels", [(3, [0], 1), (250, [1, 2, 3], 4)])
def test_speedup_sorted_plot_is_legible(n_tasks, levels, panels):
    names = [f"level{levels[i % len(levels)]}/{i}_T" for i in range(n_tasks)]
    rows = _rows(names, ["after_rl", "eager"])
    spd = {m: {n: rows[(n, m)]["speedup"] for n in names} for m in ("after_rl", "eager")}
    by_level = [(f"level{L}", [n for n in names if n.startswith(f"level{L}/")]) for L in levels] + [("all", names)]
    fig = report.plot_sorted(spd, ["after_rl", "eager"], by_level)
    assert len(fig.axes) == panels  # one level: its panel only, not a second identical "all" panel
    for ax in fig.axes:
        whole, ticks = _ticks_are_whole(ax)
        assert whole and len(ticks) <= 10, ticks  # task ranks: 1, 2, 3 ... never 0.5 steps
        assert ax.get_xlim()[1] >= len(ax.lines[0].get_xdata())
    assert [ax.get_title() for ax in fig.axes][-1] == ("level0 (3 tasks)" if n_tasks == 3 else "all (250 tasks)")


def test_header_names_the_real_versions_before_any_measurement(tmp_path, capsys, monkeypatch):
    """A run interrupted before its first measurement has no bench record: the versions come from runs.jsonl."""
    monkeypatch.setattr("sys.argv", ["evaluate.py", "--device=cpu"])
    run = report.this_run()
    tasks = [dict(name="tasks/a", level=0)]
    report.write_report(str(tmp_path), {}, tasks, [("after_rl", "out/rl/ckpt")], ["eager"], {}, set(), [run],
                        dict(device="cpu", protocol="strict", atol=0.01, rtol=0.01), 1.0)
    md = open(tmp_path / "summary.md").read()
    assert f"torch {torch.__version__}, CUDA {torch.version.cuda or 'none'}" in md and "torch None" not in md
    assert "Measured 0 of 1 selected tasks" in md
    out = capsys.readouterr().out   # not "plotting failed: ValueError" on empty data
    assert "plotting failed" not in out and "no plots" in out


def test_per_sample_by_hand():
    s = report.per_sample([2.0, None, 1.0, 0.5])  # failures as 0: [2, 0, 1, 0.5] -> mean 0.875
    assert s["samples"] == 4 and s["correct"] == 3 and s["mean"] == pytest.approx(0.875)
    sd = math.sqrt(((2 - .875) ** 2 + .875 ** 2 + .125 ** 2 + .375 ** 2) / 3)
    assert s["se"] == pytest.approx(sd / 2) and s["mean_ref"] == pytest.approx((2 + 1 + 1 + 0.5) / 4)
    text, overall = report.sample_table({"before_rl": {"t/a": [None, 1.0]}, "after_rl": {"t/a": [2.0, 2.0]}},
                                        ["before_rl", "after_rl"])
    assert "| t/a | 1/2 | 0.50x | 2/2 | 2.00x |" in text and overall["after_rl"]["mean"] == 2.0
    assert report.per_sample([])["mean"] is None
