"""cores.py: which CPU cores the evaluator's processes run on.

On a GPU box the parent's clock check reads the fixed overhead of every timed call by wall time; nvcc builds running
beside the timed runner move that overhead by up to ~2 ms. So each GPU's timed side (the runner that holds its lock,
the judge, the parent's thread while it holds the lock) gets cores of its own, and runners' imports, builds and the
fork server run on the rest. Used by runner_steps.py, batch.py, forkserver.py, workers.py, judge.py, runner.py and
buildcache.py; nothing here runs candidate code, but a runner's copy of BUILD_CPUS is the candidate's to change (it
only moves its own builds)."""
import contextlib
import os

import torch

TIMING_CORES = 2          # per GPU, on a box with at least PIN_MIN_CORES usable cores (and 4x the reserved ones),
PIN_MIN_CORES = 8         # kept for the timed side (the runner holding that GPU's lock, the judge, the parent's
_SPLIT = []               # timing thread); _SPLIT: [(usable cores, GPUs) or None], read once (core_split)
BUILD_CPUS = []           # in a runner: the cores its builds run on (runner.main; buildcache.cached_load_inline)


def _physical_gpus():
    """The machine's NVIDIA GPUs, counted without initialising CUDA in this process: the driver's /proc folders,
    else torch's count (NVML-based where it can be)."""
    with contextlib.suppress(OSError):
        return len(os.listdir("/proc/driver/nvidia/gpus"))
    return torch.cuda.device_count()


def core_split(device, gpu=None):
    """(timing cores of `gpu`, build cores) of this process's usable cores, or None (no split: pin nothing).

    On a CUDA device of a machine with n GPUs and >= max(PIN_MIN_CORES, 4 x TIMING_CORES x n) usable cores, the last
    TIMING_CORES x n cores are reserved, TIMING_CORES per GPU (slot = the physical id `gpu`, a CUDA_VISIBLE_DEVICES
    entry; None = the first entry, else 0), for whatever runs under that GPU's lock; the rest are for builds and the
    other runners' imports. An id that is not a plain index below n (a UUID, a MIG instance) gets no split: two GPUs
    must never share timing cores. Why: the parent's clock check reads the fixed overhead of each call by wall time,
    and on the H200 14 nvcc builds beside the timed runner moved an honest kernel's least overhead by 1.9 ms and a
    reference's by 0.3 ms (docstring_autocast_half named clock_mismatch; judge_clock_shave's 0.76 ms shave read
    0.49 ms, under its 0.5 ms limit). CUDAL1_PIN=0 turns it off.
    Cores and GPUs are read once per process, from the main thread's affinity."""
    if not _SPLIT:
        cpus = sorted(os.sched_getaffinity(os.getpid())) if hasattr(os, "sched_getaffinity") else []
        n = _physical_gpus()
        ok = n > 0 and len(cpus) >= max(PIN_MIN_CORES, 4 * TIMING_CORES * n) and os.environ.get("CUDAL1_PIN") != "0"
        _SPLIT.append((cpus, n) if ok else None)
    if not _SPLIT[0] or not str(device).startswith("cuda"):
        return None
    cpus, n = _SPLIT[0]
    if gpu is None:
        gpu = (os.environ.get("CUDA_VISIBLE_DEVICES") or "0").split(",")[0].strip()
    if not (str(gpu).isdigit() and int(gpu) < n):
        return None
    end = len(cpus) - TIMING_CORES * int(gpu)
    return cpus[end - TIMING_CORES:end], cpus[:len(cpus) - TIMING_CORES * n]


def pin(cpus):
    """The calling thread (and what it starts later) onto `cpus`; nothing when cpus is empty or None. Best effort: a
    core set the OS no longer allows (a shrunk cpuset) leaves the thread where it is."""
    if cpus:
        with contextlib.suppress(OSError, ValueError):
            os.sched_setaffinity(0, cpus)


@contextlib.contextmanager
def pinned(cpus):
    """The calling thread on `cpus` for the block, then back where it was (best effort both ways)."""
    if not cpus:
        yield
        return
    before = os.sched_getaffinity(0)
    pin(cpus)
    try:
        yield
    finally:
        pin(before)
