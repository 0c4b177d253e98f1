"""A timed runner makes its CUDA context before the GPU's lock (issue 12 item 4): at its task-only import, with one
allocation and no kernel, rather than at the buffer exchange under the lock (likely most of the 0.15 s "setup" an evaluation
held the H200's lock, results/bench/2026-12-02_s11/call1_throughput.log). A CPU build of torch cannot make a context,
so the allocation is recorded instead of made; CUDAL1_EARLY_CONTEXT=0 (runner.EARLY_CONTEXT) turns it off."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import runner  # noqa: E402

TASK = "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n" \
       "def get_inputs():\n    return [torch.ones(2)]\ndef get_init_inputs():\n    return []\n"


def _import_task_only(tmp_path, monkeypatch, dev, early):
    task = tmp_path / "task.py"
    task.write_text(TASK)
    made, real_empty = [], torch.empty

    def empty(*a, **kw):
        if str(kw.get("device", "")).startswith("cuda"):
            made.append((a, str(kw["device"])))
            return real_empty(*a)                         # no CUDA here: what a context's allocation would return
        return real_empty(*a, **kw)
    monkeypatch.setattr(torch, "empty", empty)
    monkeypatch.setattr(runner, "EARLY_CONTEXT", early)
    monkeypatch.setattr(runner, "set_flags", lambda flags: None)   # backend flags: not this test's business
    st = dict(task=None)
    reply = runner._handle(dict(op="import", task_only=True), st, dict(task_path=str(task)), torch.device(dev))
    assert reply == dict(ok=True) and st["task"] is not None, reply
    return made


def test_timed_runner_makes_its_context_at_the_task_import(tmp_path, monkeypatch):
    assert _import_task_only(tmp_path, monkeypatch, "cuda:0", True) == [((1,), "cuda:0")]


def test_no_context_on_the_cpu_or_when_turned_off(tmp_path, monkeypatch):
    assert _import_task_only(tmp_path, monkeypatch, "cpu", True) == []
    assert _import_task_only(tmp_path, monkeypatch, "cuda:0", False) == []
