"""evaluate_many's scheduling: builds ahead on the build cores, then each job checked and timed on a GPU as soon as
its own build is done, one job per GPU at a time under that GPU's lock; an interrupt stops it cleanly.

run() knows nothing of one evaluation's steps: bench.py hands it the two it needs (build_ahead, evaluate_one).
"""
import contextlib, os, sys, threading, time
from concurrent.futures import ThreadPoolExecutor

import torch

from harness import buildcache, cores, record
from harness.runner_steps import BUILD_NICE
from harness.scan import static_check
from harness.workers import judge_for, gpu_lock

SPLIT_UNITS = 3                # compilers a split build runs at once (main.cpp, glue.cpp, cuda.cu): split_builds
INTERRUPT_GRACE_S = 5.0        # at Ctrl-C / SIGTERM, evaluations in flight get this long to finish (10 s made
                               # `timeout -k 10` kill evaluate.py before its report)


def cpu_count():
    """CPUs this process may run on (its affinity mask, e.g. under taskset or a container's cpuset)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def split_builds(n_builds, workers):
    """Whether a batch's builds may be split (buildcache: main.cpp and glue.cpp side by side beside cuda.cu, three
    compilers per build): only while they cannot fill the build cores, SPLIT_UNITS x n_builds <= workers, unless
    CUDAL1_SPLIT is set. A split build is faster alone (a fresh one-kernel build 2.9-3.4 s against 4.0-5.1 s as one
    file on an H200 box's 16 cores) and no faster in a crowd, where its second unit is only more work: on one H200
    box, 64 builds on 14 workers had 48 (split) and 49 (one file) evaluations done at 57 s, and the split build's
    two more headers took their making from 29.8 to 47.4 s.
    False: the batch's build runners get CUDAL1_SPLIT=0 and its prebuilt header is the light one alone."""
    return os.environ.get("CUDAL1_SPLIT", "auto") != "auto" or SPLIT_UNITS * n_builds <= workers


def prebuild_wanted(device, sources):
    """Whether a batch makes main.cpp's precompiled header before its builds: on a GPU (CPU runs are tests and
    demos, whose few builds would compete with it on 2 cores), unless CUDAL1_PCH=0, when a candidate to build may
    call load_inline."""
    return device == "cuda" and os.environ.get("CUDAL1_PCH", "1") != "0" and \
        any("load_inline" in s or "cpp_extension" in s for s in sources)


def prebuild_pch(root, build_cpus, split=True):
    """buildcache.prebuild_pch on the build cores (a thread of the parent; gcc inherits the thread's affinity), never
    raising: without the header the builds are slower, not wrong. split: the split build's two headers too."""
    with contextlib.suppress(Exception), cores.pinned(build_cpus):
        buildcache.prebuild_pch(root, with_cuda=True, split=split)


def warm_judge(device, gpu, options):
    """The judge of `gpu` started, its CUDA context, clock and copy bandwidth made (judge.py warm), under the GPU's
    lock; never raising (the first evaluation would make them itself). A thread of run()."""
    with contextlib.suppress(Exception):
        judge_worker = judge_for(device, gpu, options.build_root)
        with gpu_lock(device, gpu):
            judge_worker.ask(dict(op="warm", protocol=options.protocol), 120.0)


class LiveWorkers:
    """The runners of one batch's builds (or evaluations) in flight, for an interrupt to kill. Once closed, a
    runner that registers is killed at once: it was being forked (the fork server itself may still have been
    starting) while the others were killed, and would otherwise hold the interrupted run until its timeout."""

    def __init__(self):
        self.workers, self.closed, self.lock = set(), False, threading.Lock()

    def add(self, worker):
        with self.lock:
            if not self.closed:
                self.workers.add(worker)
                return
        worker.kill()

    def discard(self, worker):
        with self.lock:
            self.workers.discard(worker)

    def close(self):
        with self.lock:
            self.closed, workers, self.workers = True, list(self.workers), set()
        for worker in workers:
            worker.kill()


def run(jobs, opts, device, *, build_ahead, evaluate_one, build_workers=None, progress=False, gpus=None,
        overlap=True, on_result=None, per_gpu=2):
    """bench.evaluate_many's work (its docstring says what it does) for jobs [(task_name, task_src, candidate_src,
    overrides)] and their Options `opts`. build_ahead(task_src, candidate_src, options, live=, split=, place=) and
    evaluate_one(task_name, task_src, candidate_src, options, gpu, live=, built=) return records."""
    began = time.perf_counter()
    grace = float(os.environ.get("CUDAL1_INTERRUPT_GRACE_S", INTERRUPT_GRACE_S))
    if gpus is None:
        seen = os.environ.get("CUDA_VISIBLE_DEVICES")
        n = torch.cuda.device_count() if device == "cuda" else 0
        gpus = [g.strip() for g in seen.split(",") if g.strip()][:n] if seen else [str(i) for i in range(n)]
    slots = list(gpus) or [None]
    say = (lambda msg: print(f"[bench] {msg}", file=sys.stderr, flush=True)) if progress else (lambda msg: None)
    todo = {}
    for (_, task_src, cand_src, _), options in zip(jobs, opts):
        if not (options.static_checks and static_check(cand_src, task_src)) and not options.reference_only:
            todo.setdefault(record.source_hash(cand_src), (cand_src, options, task_src))
    workers = build_workers or max(1, cpu_count() - (2 * len(slots) if overlap else 0))
    split_ok = split_builds(len(todo), workers)
    if prebuild_wanted(device, [src for src, _, _ in todo.values()]):
        root = opts[0].build_root                         # main.cpp's precompiled header first, at normal priority
        split = cores.core_split("cuda", slots[0])        # (read here: core_split caches the main thread's cores)
        threading.Thread(target=prebuild_pch, args=(root, split[1] if split else None, split_ok),
                         daemon=True).start()
    timed = [options for options in opts if not options.check_only]
    if device == "cuda" and timed:                        # the judges' CUDA context and clock while builds run
        for g in slots:
            threading.Thread(target=warm_judge, args=(device, g, timed[0]), daemon=True).start()
    build_pool = ThreadPoolExecutor(max(1, min(workers, len(todo) or 1)))
    done, building = [0], LiveWorkers()                   # building: the runners of builds in flight
    evaluating, stopped = LiveWorkers(), threading.Event()   # the runners of evaluations in flight; set at a stop

    def build_one(place, h, src, options, task_src):
        began_at = time.perf_counter()
        r = build_ahead(task_src, src, options, live=building, split=split_ok, place=place)
        done[0] += 1
        if r["status"] != "ok" or (r.get("compile_s") or 0) >= 0.05:   # not for candidates with nothing to build
            ps = r.get("phase_s") or {}
            say(f"build {done[0]}/{len(todo)} {h} {r['status']} {r.get('compile_s') or 0:.1f} s at "
                f"{time.perf_counter() - began:.1f} s (began at {began_at - began:.1f} s: process start "
                f"{ps.get('start', 0):.2f} s, import {ps.get('import', 0):.1f} s, in all {r.get('eval_s') or 0:.1f} s; "
                f"niceness {min(19, BUILD_NICE + place)})")
        return r
    # In queue order, each one nicer than the last (build_ahead's place): 14 builds sharing 14 cores evenly all
    # landed together, 13-15 s into a 64-candidate batch, while the GPU waited
    builds = {h: build_pool.submit(build_one, i, h, *v) for i, (h, v) in enumerate(todo.items())}
    if not overlap:
        for f in builds.values():
            f.result()
    results = [None] * len(jobs)

    def one(i, g):
        name, task_src, cand_src, _ = jobs[i]
        key = record.source_hash(cand_src)
        b = builds[key].result() if key in builds else None
        if b and b["status"] in ("compile_error", "timeout"):
            r = record.blank(name, cand_src, opts[i].protocol, opts[i].device)
            r.update({k: b.get(k) for k in ("status", "error", "error_type", "compile_s")}, eval_s=0.0)
        else:
            r = evaluate_one(name, task_src, cand_src, opts[i], g, live=evaluating, built=b is not None)
        if stopped.is_set():                              # killed by the interrupt below: not a verdict
            return
        results[i] = r
        if on_result is not None:
            on_result(i, r)
        say(f"eval {i + 1}/{len(jobs)}{'' if g is None else f' gpu {g}'} {record.summary(r)}")

    hashes = [record.source_hash(j[2]) for j in jobs]

    def in_build_order():                                 # job indices as their builds finish
        waiting = list(range(len(jobs)))
        while waiting:
            for i in [i for i in waiting if hashes[i] not in builds or builds[hashes[i]].done()]:
                waiting.remove(i)
                yield i
            time.sleep(0.02)

    # The main thread hands out the jobs (so an interrupt, which Python delivers to it, stops the hand-out at
    # once); each GPU takes up to per_gpu jobs at a time, and its lock lets one of them at a time check and time.
    # On the CPU device the "GPU" is the CPU itself: a second job's start would share it with a timing.
    free, cond = {g: 1 if device == "cpu" else max(1, per_gpu) for g in slots}, threading.Condition()

    def run_job(i, g):
        try:
            one(i, g)
        finally:
            with cond:
                free[g] += 1
                cond.notify_all()
    pool, futures = ThreadPoolExecutor(sum(free.values())), []
    try:
        for i in in_build_order():
            with cond:
                while not any(free.values()):
                    cond.wait()
                g = max(slots, key=lambda s_: free[s_])
                free[g] -= 1
            futures.append(pool.submit(run_job, i, g))
        for f in futures:
            f.result()
    except BaseException:
        build_pool.shutdown(wait=False, cancel_futures=True)   # Ctrl-C / SIGTERM: no build is waited for (one
        building.close()                                  # took 135 s on the H200, past `timeout`'s grace period)
        end = time.monotonic() + grace                    # evaluations in flight may finish within the grace
        for f in futures:                                 # period (their results reach on_result); nothing new
            with contextlib.suppress(BaseException):      # starts; then the rest are killed, unrecorded (a hung
                f.result(timeout=max(0.0, end - time.monotonic()))   # one would hold `timeout` past its grace)
        stopped.set()
        evaluating.close()
        raise
    finally:
        pool.shutdown(wait=True)
        build_pool.shutdown(wait=True, cancel_futures=True)
    return results
