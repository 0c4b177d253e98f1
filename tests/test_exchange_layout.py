"""Outputs reach the judge as stored (CUDA-L1 A100 level1/86): a dense output that is not
contiguous (channels_last, a transpose) is copied into the judge's buffer without a .contiguous() copy, whose cost
the parent's clock saw and the reference's contiguous output never paid; the judge permutes it back. A runner that
names a false order only scrambles its own output. Golden orders by hand, the file exchange, real subprocesses."""
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import bench  # noqa: E402
from harness import exchange  # noqa: E402
from harness import judge  # noqa: E402
from harness import record  # noqa: E402


def test_dense_order_by_hand():
    x = torch.arange(2 * 3 * 4 * 5.0).reshape(2, 3, 4, 5)
    assert exchange.dense_order(x) is None                                            # contiguous
    assert exchange.dense_order(x.contiguous(memory_format=torch.channels_last)) == [0, 2, 3, 1]   # N, H, W, C
    assert exchange.dense_order(torch.ones(3, 4).t()) == [1, 0]
    assert exchange.dense_order(torch.ones(3, 1).expand(3, 4)) is None                # stride 0: needs a copy
    assert exchange.dense_order(torch.ones(4, 6)[:, :3]) is None                      # gaps: needs a copy


def test_channels_last_output_is_delivered_as_stored(tmp_path, monkeypatch):
    t = torch.randn(2, 3, 4, 5).contiguous(memory_format=torch.channels_last)
    n = t.numel() * t.element_size()
    path = tmp_path / "ex.bin"
    path.write_bytes(b"\0" * n)
    ex = exchange.Exchange(dict(kind="file", path=str(path), layout=[(0, n, "float32", list(t.shape))]))
    copies, contiguous = [], torch.Tensor.contiguous

    def watched(self, *a, **k):
        out = contiguous(self, *a, **k)
        if out.data_ptr() != self.data_ptr():
            copies.append(tuple(self.shape))
        return out
    monkeypatch.setattr(torch.Tensor, "contiguous", watched)
    cs = ex.write([t])
    monkeypatch.undo()
    assert copies == [] and ex.orders == [[0, 2, 3, 1]]
    raw = torch.frombuffer(bytearray(path.read_bytes()), dtype=torch.float32).reshape(t.shape)   # as the judge reads
    assert exchange.checksum([raw]) == cs                               # the judge checks the bytes as delivered
    back = judge.as_stored([raw], ex.orders)[0]
    assert back.shape == t.shape and torch.equal(back, t)
    assert judge.as_stored([raw], [[0, 1, 1, 3]]) is None and judge.as_stored([raw], [[0, 1]]) is None
    assert judge.as_stored([raw], "x") is None and judge.as_stored([raw], None)[0] is raw


TASK = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0

def get_inputs():
    return [torch.randn(4, 8, 16, 16)]

def get_init_inputs():
    return []
'''
NHWC = TASK.replace("class Model(", "class ModelNew(").replace(
    "return torch.relu(x) * 2.0", "return (torch.relu(x) * 2.0).contiguous(memory_format=torch.channels_last)")
NHWC_WRONG = NHWC.replace("* 2.0)", "* 2.0).permute(0, 1, 3, 2)")   # H and W swapped: same shape, wrong values


@pytest.mark.parametrize("cand,status", [(NHWC, "ok"), (NHWC_WRONG, "incorrect")], ids=["nhwc", "nhwc_swapped"])
def test_channels_last_candidate_is_judged_on_its_values(tmp_path, cand, status):
    r = bench.evaluate(TASK, cand, device="cpu", num_correct_trials=2, time_budget_s=0.1, timeout_s=120,
                       build_root=str(tmp_path))
    assert r["status"] == status, record.summary(r)
