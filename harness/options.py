"""The options of one evaluation: what bench.evaluate and bench.evaluate_many take beyond the two sources.

make() checks them and returns a frozen Options, the form every step of an evaluation reads (harness/session.py,
harness/runner_steps.py).
"""
import dataclasses
import os

from harness import runner
from harness.task_io import FIXED_FLAGS

PROTOCOLS = ("strict", "kernelbench", "cudal1")
PROTOCOL_TRIALS = dict(strict=5, kernelbench=5, cudal1=10)     # default num_correct_trials per protocol
CLOCKS = ("claims", "gate")        # what a timed call's time comes from (Options.clock)


@dataclasses.dataclass(frozen=True)
class Options:
    """One evaluation's settings (the keywords of bench.evaluate, as make() resolved them).

    device: "cuda" | "cpu"; protocol: one of PROTOCOLS (how a call is timed, harness/README.md); atol, rtol: the
    isclose tolerances (KernelBench's published results: 1e-2); trials: correctness trials (the keyword
    num_correct_trials; None = the protocol's 5, 5, 10); timeout_s: wall seconds for the whole evaluation, build
    included, waiting for the GPU not included (a single call is also limited to max(30 s, 100x the reference's
    time)); arch: TORCH_CUDA_ARCH_LIST for the candidate's nvcc builds; build_root: the build cache (default
    $CUDAL1_BUILD_ROOT or ~/.cache/cudal1/build); static_checks: the static scan (False for trusted baselines
    only); time_budget_s: seconds the candidate's timed calls should take (the strict protocol's call count);
    remeasure_above: a speedup above this (x) is timed twice and the lower counts (CUDA-L1, REFERENCE.md §1.3);
    check_only: correctness only, no timing; flags_override: backend flags (keys of FIXED_FLAGS) in force during the
    candidate's own code, the reference keeping FIXED_FLAGS (trusted baselines, static_checks=False); extra_env:
    variables for the candidate's process, e.g. a shared TORCHINDUCTOR_CACHE_DIR (trusted baselines);
    reference_only: the reference's timed calls alone (ref_ms = cand_ms, speedup 1.0; the candidate is neither built
    nor imported: evaluate.py's eager baseline); clock: "gate" (the default: the parent's own clock through a gate
    on the runner's stream, harness/gate.py; the strict protocol on a GPU only: elsewhere, or where the gate cannot be
    armed, claims count and the record's clock says why) or "claims" (the runner's per-call times, checked against
    the parent's clock); $CUDAL1_CLOCK overrides.
    Set by bench.py itself, never by a caller: build_only (import the candidate, make ModelNew on the meta device,
    stop: a build ahead) and build_nice (that runner's niceness; None = runner_steps.BUILD_NICE)."""
    device: str = "cuda"
    protocol: str = "strict"
    atol: float = 1e-2
    rtol: float = 1e-2
    trials: int = 5
    timeout_s: float = 300.0
    arch: str | None = None
    build_root: str = ""
    static_checks: bool = True
    time_budget_s: float = 2.0
    remeasure_above: float = 3.0
    check_only: bool = False
    flags_override: dict | None = None
    extra_env: dict | None = None
    reference_only: bool = False
    build_only: bool = False
    build_nice: int | None = None
    clock: str = "gate"


def make(device="cuda", protocol="strict", atol=1e-2, rtol=1e-2, num_correct_trials=None, timeout_s=300.0,
         arch=None, build_root=None, static_checks=True, time_budget_s=2.0, remeasure_above=3.0, check_only=False,
         flags_override=None, extra_env=None, reference_only=False, clock="gate") -> Options:
    """Options from bench.evaluate's keywords (Options's docstring), checked. Raises ValueError for a bad value and
    TypeError for an unknown keyword."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {PROTOCOLS}, not {protocol!r}")
    if (flags_override or extra_env) and static_checks:
        raise ValueError("flags_override and extra_env are for trusted baselines only: pass static_checks=False")
    bad = set(flags_override or {}) - set(FIXED_FLAGS)
    if bad:
        raise ValueError(f"flags_override keys must be among {sorted(FIXED_FLAGS)}, not {sorted(bad)}")
    if device not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cuda' or 'cpu', not {device!r}")
    if clock not in CLOCKS:
        raise ValueError(f"clock must be one of {CLOCKS}, not {clock!r}")
    if reference_only and check_only:
        raise ValueError("reference_only times the reference; check_only times nothing: pass one of them")
    return Options(device=device, protocol=protocol, atol=atol, rtol=rtol, timeout_s=float(timeout_s), arch=arch,
                   trials=num_correct_trials or PROTOCOL_TRIALS[protocol], static_checks=static_checks,
                   build_root=os.path.abspath(build_root) if build_root else runner.default_build_root(),
                   time_budget_s=time_budget_s, remeasure_above=remeasure_above, check_only=check_only,
                   flags_override=dict(flags_override) if flags_override else None, extra_env=extra_env,
                   reference_only=reference_only, clock=clock)
