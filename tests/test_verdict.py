"""session.Session.verdict on hand-made timed sets: the parent's clock rules, golden values by hand.

A timed set is [(round, claimed ms, clock s)]; the clock is the parent's wall clock on a GPU and the runner's CPU time
on the CPU device. No process, no task: only the arithmetic that turns measurements into a speedup and a hack.
"""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from harness import session  # noqa: E402
from harness.options import Options  # noqa: E402


def verdict(device, cand, ref, protocol="strict", first=None):
    """The record verdict() writes for one candidate set and one reference set of (claimed ms, clock ms) calls;
    `first` = (cand, ref) of a first draw that measure() measured again."""
    s = object.__new__(session.Session)
    s.gate = None  # the claims clock (Session.__init__ sets it)
    s.options, s.res, s.task_info, s.hacks = Options(device=device, protocol=protocol), {}, {}, []
    s.clock_kind = "cpu" if device == "cpu" else "wall"
    s.cand_sets = [[(0, m, w / 1e3) for m, w in cand]]
    s.ref_sets = [[(0, m, w / 1e3) for m, w in ref]]
    s.pool = None if first is None else ([[(0, m, w / 1e3) for m, w in first[0]]],
                                         [[(0, m, w / 1e3) for m, w in first[1]]])
    s.verdict()
    return s.res, [h for h, _ in s.hacks]


REF = [(40.0, 50.0)] * 5          # the reference: 40 ms claimed, 50 ms on the clock: 10 ms overhead per call


def test_cpu_honest_claim_is_counted_as_claimed():
    res, hacks = verdict("cpu", [(20.0, 31.0)] * 5, REF)
    # clock floor 31 - 10 - max(5 ms, 0.25 x 10 ms) = 16 ms < the 20 ms claim: the claim counts
    assert res["cand_ms"] == pytest.approx(20.0) and res["ref_ms"] == pytest.approx(40.0)
    assert res["clock"]["excess_ms"] == pytest.approx(1.0) and hacks == []


def test_cpu_forged_claim_within_the_limit_earns_little():
    # claims 34 ms of 40 ms of work: the excess, 16 - 10 = 6 ms, is under the limit max(5 ms, 0.2 x 34 ms,
    # 0.25 x 10 ms) = 6.8 ms, so no hack is named, but the counted time is the clock's floor 50 - 10 - 5 = 35 ms
    res, hacks = verdict("cpu", [(34.0, 50.0)] * 5, REF)
    assert hacks == []
    assert res["clock"]["limit_ms"] == pytest.approx(6.8) and res["clock"]["excess_ms"] == pytest.approx(6.0)
    assert res["cand_ms"] == pytest.approx(35.0)                # not 34
    assert res["ref_ms"] / res["cand_ms"] == pytest.approx(40.0 / 35.0)
    assert res["clock"]["claimed_ms"] == pytest.approx(34.0)


def test_cpu_claim_of_the_real_time_over_1_4_is_named():
    # judge_clock_shave's forgery on 40 ms of work: claims 28.6 ms; excess 50 - 28.6 - 10 = 11.4 ms > max(5 ms,
    # 0.2 x 28.6 ms = 5.72 ms, 2.5 ms)
    res, hacks = verdict("cpu", [(28.6, 50.0)] * 5, REF)
    assert hacks == ["clock_mismatch"] and res["clock"]["limit_ms"] == pytest.approx(5.72)


def test_cpu_short_calls_keep_their_claims_within_the_allowance():
    # a 0.2 ms kernel beside 2 ms of overhead, its phase 1.5 ms noisier than the reference's: under the 5 ms
    # allowance the floor (0.2 + 3.5 - 2 - 5 < 0) leaves the claim alone; the speedup is 1.0 / 0.2
    res, hacks = verdict("cpu", [(0.2, 3.7)] * 5, [(1.0, 3.0)] * 5)
    assert res["cand_ms"] == pytest.approx(0.2) and hacks == []


def test_cpu_large_forgery_is_named():
    res, hacks = verdict("cpu", [(1.0, 50.0)] * 5, REF)      # excess 49 - 10 = 39 ms > max(5, 0.2, 2.5)
    assert hacks == ["clock_mismatch"] and res["clock"]["excess_ms"] == pytest.approx(39.0)


def test_gpu_claims_are_not_floored_and_least_overheads_count():
    # on a GPU the claim counts as claimed (no floor); the least overhead of each side is its own:
    # ref min(12.0 - 10, 11.5 - 10) = 1.5, cand min(3.0 - 1, 2.8 - 1) = 1.8: excess 0.3 < 0.5 ms
    res, hacks = verdict("cuda", [(1.0, 3.0), (1.0, 2.8)], [(10.0, 12.0), (10.0, 11.5)])
    assert res["cand_ms"] == pytest.approx(1.0) and hacks == []
    assert res["clock"]["overhead_ms"] == pytest.approx(1.5) and res["clock"]["excess_ms"] == pytest.approx(0.3)
    # 1 ms claimed, 2.5 ms unexplained: > max(0.5, 0.25 x 1, 0.15 x 1.5) -> named
    res, hacks = verdict("cuda", [(1.0, 5.0), (1.0, 5.0)], [(10.0, 12.0), (10.0, 11.5)])
    assert hacks == ["clock_mismatch"] and res["clock"]["excess_ms"] == pytest.approx(2.5)


def test_gpu_second_draw_pools_both_draws_calls():
    # judge_clock_shave on a 2.7 ms GEMM: claims 1.95 ms of a real 2.73 ms, 0.2 ms of honest overhead per call.
    # First draw: candidate 1.95 claimed / 3.08 ms on the clock (0.2 + 0.78 shaved + 0.1 load), reference 2.73 /
    # 2.93: excess 0.88 ms. Second draw with the reference's phase loaded (+0.4 ms on its every call): alone,
    # excess (3.03 - 1.95) - (3.33 - 2.73) = 1.08 - 0.60 = 0.48 ms < the 0.5 ms limit, so it passed; pooled with
    # the first draw's reference (least overhead 0.2 ms) it reads 1.08 - 0.2 = 0.88 ms: named.
    cand1, ref1 = [(1.95, 3.08)] * 5, [(2.73, 2.93)] * 5
    cand2, ref2 = [(1.95, 3.03)] * 5, [(2.73, 3.33)] * 5
    res, hacks = verdict("cuda", cand2, ref2)
    assert hacks == [] and res["clock"]["excess_ms"] == pytest.approx(0.48)    # the second draw alone: passes
    res, hacks = verdict("cuda", cand2, ref2, first=(cand1, ref1))
    assert hacks == ["clock_mismatch"] and res["clock"]["excess_ms"] == pytest.approx(0.88)
    assert res["clock"]["overhead_ms"] == pytest.approx(0.2) and res["cand_ms"] == pytest.approx(1.95)
    # an honest GEMM whose first draw ran beside builds (+0.78 ms per candidate call), the second calm: the
    # candidate's least overhead of both draws is its own 0.2 ms, excess 0
    res, hacks = verdict("cuda", [(2.73, 2.93)] * 5, [(2.73, 2.93)] * 5, first=([(2.73, 3.71)] * 5, ref1))
    assert hacks == [] and res["clock"]["excess_ms"] == pytest.approx(0.0)


def measured(attempts, hacks_before=(), clock_kind="wall"):
    """Session.measure() over scripted attempts: each (excess ms, limit ms) is what one measurement's verdict finds
    (a clock_mismatch when excess > limit). Returns the final hacks, the clock record and the restarts made."""
    s = object.__new__(session.Session)
    s.gate = None  # the claims clock (Session.__init__ sets it)
    s.res, s.hacks, calls = {"phase_s": {}}, list(hacks_before), dict(restart=0, verdict=0)
    s.mark = 0.0                                      # lap()'s clock: the phases are not what these tests read
    s.cand_sets = s.ref_sets = s.pool = None
    s.clock_kind = clock_kind
    script = iter(attempts)

    def verdict():
        excess, limit, *times = next(script)         # times: (ref_ms, cand_ms) of that draw, where a test needs them
        calls["verdict"] += 1
        s.res["clock"] = dict(excess_ms=excess, limit_ms=limit)
        if times:
            s.res.update(ref_ms=times[0], cand_ms=times[1], timed_calls=10)
        if excess > limit:
            s.hacks.append(("clock_mismatch", f"{excess} > {limit}"))
    s.timing = s.reference = s.end_candidate = lambda: None
    s.verdict = verdict
    def restart():                      # the first draw's calls are kept for the second verdict (pooled)
        assert s.pool is not None
        calls["restart"] += 1
    s.restart = restart
    s.measure()
    measured.res = s.res                              # the record, for the tests that read its times
    return [h for h, _ in s.hacks], s.res["clock"], calls


def test_a_narrow_mismatch_that_does_not_hold_is_no_hack():
    # the H200's honest 2.7 ms GEMM timed beside 14 builds: 0.78 ms over a 0.68 ms limit, then calm
    hacks, clock, calls = measured([(0.78, 0.68), (0.05, 0.68)])
    assert hacks == [] and calls == dict(restart=1, verdict=2)
    assert clock["excess_ms"] == 0.05 and clock["first"]["excess_ms"] == 0.78


def test_a_shave_that_holds_is_named():
    # judge_clock_shave on the H200: 0.77 ms over 0.5 ms, both times
    hacks, clock, calls = measured([(0.77, 0.5), (0.79, 0.5)])
    assert hacks == ["clock_mismatch"] and calls["restart"] == 1 and clock["first"]["excess_ms"] == 0.77


def test_a_gross_forgery_or_a_second_hack_is_named_at_once():
    hacks, _, calls = measured([(84.0, 0.5)])               # a patched timer: 168x its limit
    assert hacks == ["clock_mismatch"] and calls == dict(restart=0, verdict=1)
    hacks, _, calls = measured([(0.6, 0.5)], hacks_before=[("fallback", "a build failed")])
    assert hacks == ["fallback", "clock_mismatch"] and calls["restart"] == 0


def test_a_legit_kernel_far_over_the_limit_under_load_gets_a_second_draw():
    # docstring_autocast_half on the H200 beside 14 builds: 1.88 ms over a 0.5 ms limit (3.8x), then calm
    hacks, clock, calls = measured([(1.88, 0.5), (0.1, 0.5)])
    assert hacks == [] and calls == dict(restart=1, verdict=2) and clock["first"]["excess_ms"] == 1.88
    # a 40x forgery at 5.4x its limit is measured again and named again
    hacks, _, calls = measured([(2.7, 0.5), (2.6, 0.5)])
    assert hacks == ["clock_mismatch"] and calls["restart"] == 1


def test_a_pass_close_to_the_limit_gets_a_second_draw():
    # judge_clock_shave once read 0.40 ms against 0.5 in the whole GPU suite (its reference's phase slowed);
    # measured again (pooled: the calmer reference's overhead counts) it reads as a shave that holds: named
    hacks, clock, calls = measured([(0.40, 0.5), (0.70, 0.5)])
    assert hacks == ["clock_mismatch"] and calls == dict(restart=1, verdict=2) and clock["first"]["excess_ms"] == 0.40
    # an honest kernel at 0.45 of 0.5, then 0.2: no hack, the second draw is the verdict
    hacks, clock, calls = measured([(0.45, 0.5), (0.2, 0.5)])
    assert hacks == [] and calls["restart"] == 1 and clock["excess_ms"] == 0.2
    # the lower of a pass's two speedups counts, whichever draw it came from (no re-roll to gain from)
    _, clock, _ = measured([(0.45, 0.5, 2.0, 1.0), (0.2, 0.5, 2.0, 0.5)])
    assert measured.res["ref_ms"] / measured.res["cand_ms"] == 2.0
    _, clock, _ = measured([(0.45, 0.5, 2.0, 0.5), (0.2, 0.5, 2.0, 1.0)])
    assert measured.res["ref_ms"] / measured.res["cand_ms"] == 2.0
    # at or under half its limit: one draw; with another hack already named: no second draw either
    hacks, _, calls = measured([(0.25, 0.5)])
    assert hacks == [] and calls == dict(restart=0, verdict=1)
    hacks, _, calls = measured([(0.45, 0.5)], hacks_before=[("fallback", "a build failed")])
    assert hacks == ["fallback"] and calls["restart"] == 0
    hacks, _, calls = measured([(0.45, 0.5)], clock_kind="cpu")
    assert hacks == [] and calls["restart"] == 0


def test_the_s12_shave_pooled_with_a_calm_reference_is_named():
    # the numbers of call4_gpu_suite_early_context.log: claimed 1.95 ms, the candidate's least clock - claim 2.15 ms,
    # the reference's (2.73 ms claimed) 1.75 ms: excess 0.40 ms, a pass; a second draw whose reference phase is calm
    # (overhead 1.30, as alone: 1.23-1.37) pooled: 2.10 - 1.30 = 0.80 ms > 0.5: named
    cand1, ref1 = [(1.95, 4.10)] * 5, [(2.73, 4.48)] * 5
    res, hacks = verdict("cuda", cand1, ref1)
    assert hacks == [] and res["clock"]["excess_ms"] == pytest.approx(0.40)
    res, hacks = verdict("cuda", [(1.95, 4.05)] * 5, [(2.73, 4.03)] * 5, first=(cand1, ref1))
    assert hacks == ["clock_mismatch"] and res["clock"]["excess_ms"] == pytest.approx(0.80)


def test_the_cpu_device_does_not_measure_again():
    # on a busy 2-core box a second draw let judge_clock_shave through; the CPU verdict's median and floor stay alone
    hacks, _, calls = measured([(0.78, 0.68)], clock_kind="cpu")
    assert hacks == ["clock_mismatch"] and calls == dict(restart=0, verdict=1)
