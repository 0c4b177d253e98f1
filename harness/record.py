"""The result record of one evaluation: a flat, JSON-serialisable dict that no candidate code ever touched.

Fields (blank() makes them all; harness/session.py and harness/runner_steps.py fill them in):
  task, candidate_hash (source_hash of the candidate), status (the verdict: ok | static | compile_error |
  runtime_error | incorrect | timeout | crash | hack; reward only "ok"), hack (the named kind when status is hack),
  compiled, correct, speedup (ref_ms / cand_ms, unrounded, only when correct), speedup_rounded (toward 1.00 at two
  decimals, as CUDA-L1: round_toward_one), ref_ms and cand_ms (the protocol's statistic, ms per call), timed_calls,
  trials, error (for a failed build: the first compiler error; this machine's paths scrubbed), error_type,
  max_abs_err, max_rel_err, mismatches, nans (of the worst checked output), protocol, device, device_name,
  torch_version, cuda_version, backend_flags (task_io.FIXED_FLAGS), flags_override, compile_s, eval_s (wall s),
  phase_s (wall s per step: start, fork, import, models, wait (for the GPU's lock), setup, trials, timing, end (the
  runner handed to its kill), settle (waiting for earlier runners' deaths before a timed call: workers.GpuLock),
  reference and its parts ref_setup, ref_calls), input_shapes, custom_kernel_calls (calls into load_inline / load
  extensions during the first trial; 0 = PyTorch-only; None = unknown), floor_ms (the physical floor:
  session.time_floor_ms), remeasure ({first, second, rel_diff}: a speedup above remeasure_above timed twice),
  precision ({err, ref_err, half_err, threshold} of the worst checked output: judge.py), clock ({excess_ms,
  overhead_ms, limit_ms, claimed_ms, kind, gate_error[, first]}: the parent's clock check, session.Session.verdict;
  with kind "gate", what counted instead: {fixed_ms, pre_ms, gap_ms, event_ms, stages_ms, null_stages_ms, late_arms,
  tails, tail_ms, tails_by, stale, calls, ref}: gate.Calibration.summary), degenerate
  (trivial outputs that pass this task's check, [] none, None unknown), hang_limit_s, exchange (ipc | file: how
  outputs reach the judge), fp32_reference_off ({mismatches, max_rel_err, where}: the output failed isclose against
  the fp32 reference but is as close to the float64 truth as that reference is, so it counts as correct:
  judge.mismatches_vs64), fallback_checked_in_models (True: ModelNew's builds were checked for a caught failure),
  sandbox (the layers that confined the runner: landlock+bwrap | landlock | bwrap | none; harness/sandbox.py; None:
  no runner started); phase_s["landlock"]: the s the runner took to confine itself.
"""
import hashlib
import math
import os
import sys
import tempfile

import torch

from harness import runner
from harness.task_io import FIXED_FLAGS

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def source_hash(src):
    """16 hex digits of the SHA-256 of a source text (a record's candidate_hash)."""
    return hashlib.sha256((src or "").encode()).hexdigest()[:16]


def blank(task_name, candidate_src, protocol, device):
    """The record before anything ran: status "crash" until a step says otherwise."""
    return dict(task=task_name, candidate_hash=source_hash(candidate_src), status="crash", compiled=False,
                correct=False, speedup=None, speedup_rounded=None, ref_ms=None, cand_ms=None, error="", error_type="",
                hack=None, max_abs_err=None, max_rel_err=None, mismatches=None, nans=None, trials=0, timed_calls=0,
                protocol=protocol, device=device, device_name="cpu" if device == "cpu" else None,
                torch_version=torch.__version__, cuda_version=torch.version.cuda, backend_flags=dict(FIXED_FLAGS),
                compile_s=None, eval_s=None, phase_s={}, input_shapes=None, custom_kernel_calls=None,
                floor_ms=None, remeasure=None, flags_override=None, precision=None, clock=None, degenerate=None,
                hang_limit_s=None, exchange=None, fp32_reference_off=None, sandbox=None)


def round_toward_one(x):
    """Speedup rounded to two decimals toward 1.00 (CUDA-L1, REFERENCE.md §1.3): 1.118 -> 1.11, 0.992 -> 1.00."""
    if x is None or not math.isfinite(x):
        return x
    v = round(x * 100, 6)                  # 1.13 * 100 = 112.99999999999999 must floor to 113
    return (math.floor(v) if x >= 1 else math.ceil(v)) / 100


def summary(res):
    """One line for humans: task, hash, verdict, speedup and times (ms), first line of the error."""
    s = f"{res.get('task', '?')} [{res.get('candidate_hash', '?')}] {res.get('status')}"
    if res.get("hack"):
        s += f" ({res['hack']})"
    if res.get("speedup") is not None:
        s += f" speedup {res['speedup']:.3f}x"
    if res.get("ref_ms") is not None and res.get("cand_ms") is not None:
        s += f" (ref {res['ref_ms']:.4g} ms, cand {res['cand_ms']:.4g} ms, {res.get('timed_calls')} calls)"
    if res.get("degenerate"):
        s += f" [degenerate task: {', '.join(res['degenerate'])} passes its check]"
    if res.get("mismatches"):
        s += f" mismatches {res['mismatches']} nans {res.get('nans')} max_abs_err {res.get('max_abs_err') or 0:.3g}"
    if res.get("error"):
        msg, kind = (str(res["error"]).strip().splitlines() or [""])[0], str(res.get("error_type") or "")
        s += " | " + (msg if not kind or msg.startswith(kind) else f"{kind}: {msg}")[:160]
    return s


# what each trivial output of judge.TRIVIAL_OUTPUTS is, in words
_TRIVIAL_WORDS = dict(zeros="all zeros", constant="the output of other inputs", mean="its mean everywhere",
                      input="its first input")


def screen_line(res, skip, screen):
    """bench CLI's line on the task's degenerate screen (REFERENCE.md §3): which trivial outputs pass the task's
    check and that speedups on such a task say nothing, that none does, or that the task was not screened and why.
    res: the record; its `degenerate` comes from the evaluation's own judge; where that is None (the evaluation
    stopped before its judge set up), screen() (a bench.degenerate_screen dict) fills it unless skip (--no_screen)."""
    why = "--no_screen" if skip else ""
    if res.get("degenerate") is None and not skip:
        try:
            found = screen()
            res["degenerate"], why = (found["passed"] if found["status"] == "ok" else None), found.get("error")
        except Exception as e:                              # the screen's failure leaves the verdict alone
            why = f"{type(e).__name__}: {e}"
    passed = res.get("degenerate")
    if passed is None:
        return "task not screened for degenerate outputs: " + (str(why or "the screen failed").splitlines()
                                                               or [""])[0][:160]
    if not passed:
        return "task screened: no trivial output (all zeros, a constant, its mean, its input) passes its check"
    what = ", ".join(_TRIVIAL_WORDS.get(k, k) for k in passed)
    return f"task is degenerate: answering {what} passes its check for every input tried; speedups on it say nothing"


def scrub_paths(text, build_root=None):
    """An error text without this machine's paths (compiler command lines name the build cache, the Python
    environment, home): records are committed and shared. Longest first: <build>, <python>, <repo>, <tmp>, ~."""
    if not text:
        return text
    subs = [(build_root or runner.default_build_root(), "<build>"), (sys.prefix, "<python>"),
            (sys.base_prefix, "<python>"), (REPO, "<repo>"), (tempfile.gettempdir(), "<tmp>"),
            (os.path.expanduser("~"), "~")]
    for path, tag in sorted(subs, key=lambda x: -len(x[0] or "")):
        if path and len(path) > 1:
            text = text.replace(path.rstrip("/"), tag)
    return text
