"""When the fp32 reference is itself off (CUDA-L1 level3/49): an output that fails isclose against
the fp32 reference but is within the tolerance of the float64 truth widened by the reference's own error there is
correct (judge.mismatches_vs64); a wrong one is still wrong. Golden values by hand, then real subprocesses."""
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import bench  # noqa: E402
from harness import judge  # noqa: E402
from harness import record  # noqa: E402

# ((a + b) - a) * 2 in float32 with |a| ~ 1e8: a + b rounds b to a multiple of ulp(a) = 8, so the fp32 reference is
# off from the truth 2b by up to 8 per element, far beyond atol=rtol=1e-2; computing 2b directly is exact
TASK = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, a, b):
        return ((a + b) - a) * 2.0

def get_inputs():
    return [torch.randn(4096) * 1e8, torch.randn(4096)]

def get_init_inputs():
    return []
'''
EXACT = TASK.replace("class Model(", "class ModelNew(").replace("((a + b) - a) * 2.0", "b * 2.0")
WRONG = TASK.replace("class Model(", "class ModelNew(").replace("((a + b) - a) * 2.0", "b * 2.0 + 0.5")


def test_mismatches_vs64_by_hand():
    r64 = torch.tensor([10.0, 10.0, 10.0, 0.0], dtype=torch.float64)
    ref = torch.tensor([10.0, 12.0, 10.0, 0.0])            # the fp32 reference is off by 2 at element 1
    out = torch.tensor([10.05, 11.5, 10.5, float("nan")])
    # allowance: 0.01 + 0.01 * 10 + |ref - r64| = [0.11, 2.11, 0.11, 0.01]; |out - r64| = [0.05, 1.5, 0.5, nan]
    # -> elements 2 (0.5 > 0.11) and 3 (NaN) mismatch
    assert judge.mismatches_vs64(out, ref, r64, 1e-2, 1e-2) == 2.0
    assert judge.mismatches_vs64(r64.float(), ref, r64, 1e-2, 1e-2) == 0.0
    assert judge.compare(out[:3], ref[:3], 1e-2, 1e-2)[2] == 2.0    # isclose vs fp32 fails elements 1 and 2


@pytest.mark.parametrize("cand,status", [(EXACT, "ok"), (WRONG, "incorrect")], ids=["exact", "wrong"])
def test_an_exact_answer_to_an_inexact_reference_is_correct(tmp_path, cand, status):
    r = bench.evaluate(TASK, cand, device="cpu", num_correct_trials=2, time_budget_s=0.1, timeout_s=120,
                       build_root=str(tmp_path))
    assert r["status"] == status, record.summary(r)
    if status == "ok":
        off = r["fp32_reference_off"]
        assert off and off["mismatches"] > 100 and off["where"] == "a correctness trial", off
    else:
        assert r["mismatches"] > 1000 and not r["fp32_reference_off"], record.summary(r)
