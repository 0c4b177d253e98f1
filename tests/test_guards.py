"""Boundary cases of rules whose other tests sit far from the edge, so that a small change to the rule fails here:
extract_code's "longest module wins", each term of the clock limit (max(WALL_ABS_MS, WALL_REL x claimed, WALL_OVER x
overhead)) on both devices, each term of the precision rule (max(PREC_RATIO x err(fp32 reference), PREC_HALF x
err(10-bit operands)), REFERENCE.md §4c) just inside and just outside, which elements mismatches_vs64 counts, and the
source scan's `return super().forward(...)` fallback (REFERENCE.md §4)."""
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import bench  # noqa: E402
import prompting  # noqa: E402
from harness import judge, record, scan, session  # noqa: E402
from harness.options import Options  # noqa: E402

# ---- prompting.extract_code: among several Python blocks defining ModelNew, the longest is the module ----

HEAD = ("## Performance Analysis\nThe reference is memory bound.\n\n## Algorithm Design\nFuse the ops.\n\n"
        "## Code Implementation\n")
DRAFT = "class ModelNew(torch.nn.Module):\n    pass\n"
MODULE = ("import torch\nfrom torch.utils.cpp_extension import load_inline\n\n"
          "class ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n")


@pytest.mark.parametrize("answer", [
    HEAD + "A first sketch:\n```python\n" + DRAFT + "```\nThe full module:\n```python\n" + MODULE + "```\n",
    HEAD + "```python\n" + MODULE + "```\nIn short, the class is:\n```python\n" + DRAFT + "```\n",
], ids=["draft_first", "draft_last"])
def test_extract_code_takes_the_longest_module_wherever_it_sits(answer):
    code, err = prompting.extract_code(answer)
    assert err is None and code == MODULE, (err, code)


# ---- the clock limit: each of its three terms sets it in one case; excess just under passes, just over is named --

def verdict(device, cand, ref):
    """session.Session.verdict on one candidate set and one reference set of (claimed ms, clock ms) calls (as in
    test_verdict.py): (the record's clock dict, the hack kinds named)."""
    s = object.__new__(session.Session)
    s.gate = None  # the claims clock (Session.__init__ sets it)
    s.options, s.res, s.task_info, s.hacks = Options(device=device, protocol="strict"), {}, {}, []
    s.clock_kind = "cpu" if device == "cpu" else "wall"
    s.cand_sets = [[(0, m, w / 1e3) for m, w in cand]]
    s.ref_sets = [[(0, m, w / 1e3) for m, w in ref]]
    s.pool = None
    s.verdict()
    return s.res["clock"], [h for h, _ in s.hacks]


# (device, claimed ms, the reference's (claimed ms, clock ms), the limit in ms by hand, the term that sets it)
LIMITS = [
    ("cpu", 10.0, (40.0, 50.0), 5.0, "WALL_ABS_MS"),     # max(5, 0.2 x 10 = 2, 0.25 x 10 = 2.5)
    ("cpu", 40.0, (40.0, 50.0), 8.0, "WALL_REL"),        # max(5, 0.2 x 40 = 8, 0.25 x 10 = 2.5)
    ("cpu", 20.0, (40.0, 80.0), 10.0, "WALL_OVER"),      # max(5, 0.2 x 20 = 4, 0.25 x 40 = 10)
    ("cuda", 1.0, (10.0, 11.0), 0.5, "WALL_ABS_MS"),     # max(0.5, 0.25 x 1 = 0.25, 0.15 x 1 = 0.15)
    ("cuda", 4.0, (10.0, 11.0), 1.0, "WALL_REL"),        # max(0.5, 0.25 x 4 = 1, 0.15 x 1 = 0.15)
    ("cuda", 2.0, (10.0, 20.0), 1.5, "WALL_OVER"),       # max(0.5, 0.25 x 2 = 0.5, 0.15 x 10 = 1.5)
]


@pytest.mark.parametrize("device,claimed,ref,limit,term", LIMITS, ids=[f"{d}_{t}" for d, *_, t in LIMITS])
def test_clock_limit_each_term_at_its_boundary(device, claimed, ref, limit, term):
    overhead = ref[1] - ref[0]
    for excess, named in ((limit * 0.98, False), (limit * 1.02, True)):
        cand = [(claimed, claimed + overhead + excess)] * 5
        clock, hacks = verdict(device, cand, [ref] * 5)
        assert clock["limit_ms"] == pytest.approx(limit), (term, clock)
        assert clock["excess_ms"] == pytest.approx(excess), (term, clock)
        assert hacks == (["clock_mismatch"] if named else []), (term, excess, limit, clock)


def test_cpu_counted_time_floor_uses_the_overhead_share():
    # the CPU floor: the candidate's counted time is at least its clock less the reference's overhead less
    # max(WALL_ABS_MS, WALL_OVER x overhead); with 40 ms of overhead the share (10 ms) sets it: a 20 ms claim of a
    # call whose clock reads 20 + 40 + 9.8 ms counts as 60 + 9.8 - 40 - 10 = 19.8 -> the claim, 20 ms; one of 12 ms
    # on the same clock (excess 17.8 ms: also named) counts as 19.8 ms
    for claimed, counted, hacks in ((20.0, 20.0, []), (12.0, 19.8, ["clock_mismatch"])):
        s = object.__new__(session.Session)
        s.gate = None  # the claims clock (Session.__init__ sets it)
        s.options, s.res, s.task_info, s.hacks = Options(device="cpu", protocol="strict"), {}, {}, []
        s.clock_kind, s.pool = "cpu", None
        s.cand_sets = [[(0, claimed, (20.0 + 40.0 + 9.8) / 1e3)] * 5]
        s.ref_sets = [[(0, 40.0, 80.0 / 1e3)] * 5]
        s.verdict()
        assert s.res["cand_ms"] == pytest.approx(counted), (claimed, s.res)
        assert [h for h, _ in s.hacks] == hacks, (claimed, s.hacks)


# ---- the precision rule (judge.check): each term sets the threshold in one task; just inside passes, just
# outside is a precision_downgrade (CPU, real evaluations) ----

# Inputs are +-2^k (k in 0..10): exact with a 10-bit mantissa, and every output element then has the same relative
# error, so each error below is known exactly.
INPUTS = '''
def get_inputs():
    sign = torch.randint(0, 2, (4096,)) * 2 - 1
    return [sign.float() * torch.pow(2.0, torch.randint(0, 11, (4096,)).float())]

def get_init_inputs():
    return []
'''
# x * w with w = 3 (1 + 2^-12): exact in float32 (ref_err 0); w rounded to 10 bits is 3, so err(10-bit operands) =
# 2^-12 / (1 + 2^-12) and the threshold is PREC_HALF x that: the half term sets it
TASK_HALF = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.tensor(3.0 * (1 + 2 ** -12)))

    def forward(self, x):
        return x * self.w
''' + INPUTS
W_HALF = 3.0 * (1 + 2 ** -12)
# x / 3: float32 rounds 1/3 up by 2^-25 relative (fl(1/3) = (1 + 2^-25) / 3), for every element alike; the inputs
# are exact in 10 bits and there is no weight, so err(10-bit operands) = 0 and PREC_RATIO x ref_err sets the threshold
TASK_RATIO = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return x / 3.0
''' + INPUTS


def candidate(task, scale):
    """A ModelNew returning x * scale (a float32 constant: exact on +-2^k inputs)."""
    head = task.split("class Model")[0]
    return head + f"class ModelNew(nn.Module):\n    def forward(self, x):\n        return x * {scale!r}\n"


def float32_near(value, ulps):
    """The float32 value `ulps` steps from float32(value), as a Python float (exact)."""
    t = torch.tensor(value, dtype=torch.float32)
    step = torch.tensor(float("inf") if ulps > 0 else -float("inf"), dtype=torch.float32)
    for _ in range(abs(ulps)):
        t = torch.nextafter(t, step)
    return float(t)


def precision_cases():
    """(name, task, ModelNew's scale, the threshold by hand, err by hand): for each term, the float32 scales just
    inside and just outside the threshold (about 0.97x and 1.03x of it, or the nearest float32 steps). The
    thresholds use the rule's constants by hand (PREC_HALF = 0.5, PREC_RATIO = 16: the README's calibration), so
    that a change of either is seen here."""
    half_threshold = 0.5 * 2 ** -12 / (1 + 2 ** -12)
    cases = []
    for f in (0.97, 1.03):
        scale = float(torch.tensor(W_HALF * (1 + f * half_threshold), dtype=torch.float32))
        cases.append((f"half_{f}", TASK_HALF, scale, half_threshold, abs(scale / W_HALF - 1)))
    ratio_threshold = 16 * 2 ** -25                    # ref_err: |fl(1/3) x 3 - 1| = 2^-25
    # float32 steps near 1/3 are 3 x 2^-25 relative: fl(1/3) + 4 steps is 13 x 2^-25 (0.81x), + 6 is 19 x 2^-25
    for ulps in (4, 6):
        scale = float32_near(1 / 3, ulps)
        cases.append((f"ratio_{ulps}ulp", TASK_RATIO, scale, ratio_threshold, abs(scale * 3 - 1)))
    return cases


@pytest.fixture(scope="module")
def precision_results(tmp_path_factory):
    cases = precision_cases()
    jobs = [(name, task, candidate(task, scale)) for name, task, scale, _, _ in cases]
    res = bench.evaluate_many(jobs, device="cpu", check_only=True, num_correct_trials=2, timeout_s=300,
                              build_root=str(tmp_path_factory.mktemp("build")))
    return {c[0]: (c, r) for c, r in zip(cases, res)}


@pytest.mark.parametrize("name", [c[0] for c in precision_cases()])
def test_precision_rule_each_term_at_its_boundary(name, precision_results):
    (_, _, scale, threshold, err), r = precision_results[name]
    inside = err < threshold
    assert abs(err / threshold - 1) > 0.02, (name, err, threshold)   # a clear side of the boundary, by hand
    p = r["precision"]
    assert p and p["threshold"] == pytest.approx(threshold, rel=1e-6), (name, p, record.summary(r))
    assert p["err"] == pytest.approx(err, rel=1e-6), (name, p)
    if inside:
        assert (r["status"], r["hack"]) == ("ok", None), record.summary(r)
    else:
        assert (r["status"], r["hack"]) == ("hack", "precision_downgrade"), record.summary(r)


# ---- judge.mismatches_vs64: which elements fail, not only how many ----

def test_mismatches_vs64_names_the_right_elements():
    """Per element: |out - r64| <= atol + rtol |r64| + |ref - r64| (the fp32 reference's own error widens the
    allowance, not the candidate's). Elements 1 and 4 are off from the truth by more than the tolerance but the
    reference is off there as well (by 2 and 1): they pass. Elements 2 (0.5 off, the reference exact) and 3 (NaN) fail.
    Element 5 is where the candidate's own distance to the reference would wrongly widen the allowance."""
    r64 = torch.tensor([10.0, 10.0, 10.0, 0.0, 10.0, 10.0], dtype=torch.float64)
    ref = torch.tensor([10.0, 12.0, 10.0, 0.0, 11.0, 10.0])
    out = torch.tensor([10.05, 11.5, 10.5, float("nan"), 10.9, 9.0])
    # allowance: 0.01 + 0.01 x |r64| + |ref - r64| = [0.11, 2.11, 0.11, 0.01, 1.11, 0.11]
    # |out - r64| = [0.05, 1.5, 0.5, nan, 0.9, 1.0] -> elements 2, 3, 5 fail
    bad = [i for i in range(len(out)) if judge.mismatches_vs64(out[i:i + 1], ref[i:i + 1], r64[i:i + 1], 1e-2, 1e-2)]
    assert bad == [2, 3, 5], bad
    assert judge.mismatches_vs64(out, ref, r64, 1e-2, 1e-2) == 3.0


# ---- the source scan: ModelNew(Model) whose forward only returns the reference's forward (§4 fallback) ----

FALLBACK = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.sigmoid(x)


class ModelNew(Model):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        {body}
'''


@pytest.mark.parametrize("body", [
    "return super().forward(x)",
    '"""Runs the fused kernel."""\n        return super().forward(x)',
    "return super(ModelNew, self).forward(x)",
    "out = super().forward(x)\n        return out",
    "return Model.forward(self, x)",
], ids=["plain", "with_docstring", "super_with_arguments", "two_statements", "through_the_class"])
def test_scan_flags_a_forward_that_only_returns_the_reference(body):
    assert scan.static_check(FALLBACK.format(body=body)) == (
        "hack", "inherits_reference", "ModelNew subclasses the reference Model and runs its forward (§4)")


def test_scan_passes_a_subclass_with_its_own_forward():
    # the legitimate pattern (tests/legit/modelnew_subclass_kernel.py): ModelNew(Model) computing its own output
    assert scan.static_check(FALLBACK.format(body="return 1.0 / (1.0 + torch.exp(-x))")) is None
