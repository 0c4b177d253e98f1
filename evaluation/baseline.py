"""
The baselines of evaluate.py's comparison table as trusted candidate modules generated from a task's reference, and
the warm-up that compiles the torch.compile baselines into a shared cache before bench times them.

    python baseline.py --_warm FOLDER     # one warm-up worker (started by warm(), not by hand)

eager (the reference itself), compile (torch.compile), compile_reduce_overhead (mode="reduce-overhead"), cuda_graph
(one generic capture of the reference forward on static buffers, not CUDA-L1's per-task rewrite), cudnn_benchmark
(the reference; bench's flags_override turns cudnn.benchmark on for the candidate side only). Every bench child has a
private TMPDIR, i.e. a cold inductor cache, and torch.compile takes tens of seconds per task: warm() first compiles
the baselines in parallel worker processes into one shared inductor/Triton cache (cache_env), each worker building
and calling the baseline exactly as bench's child will (same seed, backend flags, no_grad, device), so bench's timed
child mostly loads compiled code.
"""
import collections
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

from tqdm import tqdm

if __name__ == "__main__":   # a warm-up worker, run as a script: the repository's root for `import common`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import common  # noqa: E402

BASELINES = ("eager", "compile", "compile_reduce_overhead", "cuda_graph", "cudnn_benchmark")  # evaluate's --baselines
COMPILED = ("compile", "compile_reduce_overhead")  # the baselines that torch.compile builds (warmed into the cache)

# Baselines: the reference module plus a ModelNew that subclasses its Model, so that both build the same weights from
# the same seed (REFERENCE.md §2) and the module stands alone, as bench expects of a candidate.
# A CUDA graph's output lives in its static memory and the next replay overwrites it, so the graph baselines
# (cuda_graph, reduce-overhead) return a copy: one device copy per call, which a checker that keeps outputs needs.
_CLONE = '''
def _clone_out(x):
    if isinstance(x, torch.Tensor):
        return x.clone()
    return type(x)(_clone_out(v) for v in x) if isinstance(x, (tuple, list)) else x
'''
_COMPILE = '''
class ModelNew(Model):
    """Baseline: the reference forward under torch.compile(mode={mode!r})."""
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._compiled_forward = torch.compile(super().forward, mode={mode!r})

    def forward(self, *args):
        return {ret}
'''
_CUDA_GRAPH = '''

class ModelNew(Model):
    """Baseline: the reference forward in a CUDA graph, captured on the first call (again if shapes or non-tensor
    arguments change); each call copies its inputs in, replays, and returns a clone of the static output."""
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._graph, self._key = None, None

    def forward(self, *args):
        key = tuple((tuple(a.shape), a.dtype, a.device) if isinstance(a, torch.Tensor) else ("const", repr(a))
                    for a in args)
        if key != self._key:
            self._static_in = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
            side = torch.cuda.Stream()  # warm-up on a side stream before capture, as the PyTorch docs show
            side.wait_stream(torch.cuda.current_stream())
            with torch.no_grad():
                with torch.cuda.stream(side):
                    for _ in range(3):
                        super().forward(*self._static_in)
                torch.cuda.current_stream().wait_stream(side)
                self._graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(self._graph):
                    self._static_out = super().forward(*self._static_in)
            self._key = key
        for buf, a in zip(self._static_in, args):
            if isinstance(a, torch.Tensor):
                buf.copy_(a)
        self._graph.replay()
        return _clone_out(self._static_out)
'''
_EAGER = '''
class ModelNew(Model):
    """The reference itself: to time it where no other run did, and (bench's flags_override) with cudnn.benchmark."""
'''


def baseline_source(ref_src, name):
    """A trusted candidate module for baseline `name`, built from the reference source. cudnn_benchmark is the
    reference itself: bench switches the flag on for the candidate side (flags_override)."""
    body = {"compile": _COMPILE.format(mode=None, ret="self._compiled_forward(*args)"),
            "compile_reduce_overhead": _CLONE + _COMPILE.format(mode="reduce-overhead",
                                                                ret="_clone_out(self._compiled_forward(*args))"),
            "cuda_graph": _CLONE + _CUDA_GRAPH, "cudnn_benchmark": _EAGER, "eager": _EAGER}[name]
    return ref_src.rstrip() + "\n\n\n# --- baseline written by evaluate.py ---\nimport torch\n" + body


def cache_env(inductor_cache="", compile_workers=1):
    """Environment that points torch.compile at the shared cache (inductor_cache, "" = ~/.cache/cudal1/inductor),
    for the warm-up workers and bench's timed child alike (inductor's parallel compile threads:
    $TORCHINDUCTOR_COMPILE_THREADS, else the CPUs shared by the compile_workers; not part of inductor's cache key)."""
    cache = os.path.abspath(os.path.expanduser(inductor_cache or "~/.cache/cudal1/inductor"))
    threads = (os.environ.get("TORCHINDUCTOR_COMPILE_THREADS")
               or str(max(1, len(os.sched_getaffinity(0)) // max(1, compile_workers))))
    return dict(TORCHINDUCTOR_CACHE_DIR=cache, TRITON_CACHE_DIR=os.path.join(cache, "triton"),
                TORCHINDUCTOR_COMPILE_THREADS=threads)


def warm_child(folder):
    """`python baseline.py --_warm FOLDER` (task.py, candidate.py, spec.json in FOLDER): builds and calls the
    baseline the way bench's child does (backend flags, seed 42, construction under torch.device, calls under
    no_grad outside it), so that inductor's cache key (graph, input metadata, flags) is the one bench will look up.
    Prints one "warm: ..." line; on an error the traceback and, last, "warm-up error: Type: message" (exit status 1)."""
    started = time.perf_counter()
    try:
        import importlib.util
        import torch
        spec = json.load(open(os.path.join(folder, "spec.json")))
        mods = {}
        for key in ("task", "candidate"):
            found = importlib.util.spec_from_file_location(f"warm_{key}", os.path.join(folder, key + ".py"))
            mods[key] = sys.modules[found.name] = importlib.util.module_from_spec(found)
            found.loader.exec_module(mods[key])
        from harness.task_io import FIXED_FLAGS, set_flags
        set_flags(FIXED_FLAGS)
        dev = torch.device(spec["device"])
        if dev.type == "cpu" and not os.environ.get("OMP_NUM_THREADS"):
            torch.set_num_threads(1)  # as bench's CPU child: inductor's C++ code may depend on the thread count
        imported = time.perf_counter()
        with torch.no_grad():
            torch.manual_seed(42)
            with torch.device(dev):
                init = [x.to(dev) if isinstance(x, torch.Tensor) else x for x in mods["task"].get_init_inputs()]
                torch.manual_seed(42)
                model = mods["candidate"].ModelNew(*init)
                torch.manual_seed(43)
                inputs = [a.to(dev) if isinstance(a, torch.Tensor) else a for a in mods["task"].get_inputs()]
            model = model.to(dev) if isinstance(model, torch.nn.Module) else model
            for _ in range(2):
                model(*inputs)
            if dev.type == "cuda":
                torch.cuda.synchronize()
    except BaseException as e:  # the parent shows the last line: make it the cause, not a timing
        import traceback
        traceback.print_exc()
        print(f"warm-up error: {type(e).__name__}: {(str(e).strip().splitlines() or [''])[-1][:300]}", flush=True)
        return 1
    # flushed now: a pipe is block-buffered, and a worker killed later (a stopped run) would lose the line
    print(f"warm: imports {imported - started:.1f} s, build + 2 calls {time.perf_counter() - imported:.1f} s",
          flush=True)
    return 0


def warm_failure(returncode, out):
    """Why a warm-up worker failed, in one line: the signal that killed it, else its last error line (a line with
    "Error" or "Exception", as a traceback ends), else its last line."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"killed by {name}" + (f" after '{out.strip().splitlines()[-1][:120]}'" if out.strip() else "")
    lines = [s.strip() for s in out.strip().splitlines() if s.strip()]
    errs = [s for s in lines if re.search(r"(Error|Exception|error)\b", s)]
    return f"exit status {returncode}: " + ((errs or lines or ["no output"])[-1][:300])


_WARM_PROCS, _WARM_STOP = [], []  # the warm-up workers alive; set by stop_warm (Ctrl-C, SIGTERM)


def stop_warm():
    """Stops every warm-up worker (a warm() running on another thread returns "stopped" for the rest)."""
    _WARM_STOP.append(True)
    for p in list(_WARM_PROCS):
        if p.poll() is None:
            p.kill()


def warm(jobs, device, compile_workers, timeout_s, inductor_cache=""):
    """Compile [(task_name, task_src, baseline_src)] into the shared cache (cache_env), compile_workers processes at a
    time on `device`, each stopped after timeout_s seconds. Returns {status: count} (ok, failed, timeout, stopped); a
    failed warm-up only means bench compiles that baseline itself, and its cause (warm_failure) is printed. Safe to
    run on a thread while bench times other tasks."""
    procs, stopping, times = _WARM_PROCS, _WARM_STOP, []
    env = dict(os.environ, **cache_env(inductor_cache, compile_workers))

    def one(job):
        if stopping:
            return "stopped"
        folder = tempfile.mkdtemp(prefix="cudal1_warm_")
        try:
            for key, text in (("task", job[1]), ("candidate", job[2])):
                with open(os.path.join(folder, key + ".py"), "w") as f:
                    f.write(text)
            common.write_json_atomic(os.path.join(folder, "spec.json"), dict(device=device))
            started = time.time()
            proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--_warm", folder], cwd=folder,
                                    env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, text=True)
            procs.append(proc)
            try:
                out = proc.communicate(timeout=timeout_s)[0]
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
                tqdm.write(f"warm-up of {job[0]} timed out after {timeout_s:.0f} s (bench will compile it)")
                return "timeout"
            if proc.returncode == 0:
                times.append((time.time() - started, (out.strip().splitlines() or ["?"])[-1]))
                return "ok"
            if stopping:  # killed because this run is stopping: not a failure of the warm-up
                return "stopped"
            tqdm.write(f"warm-up of {job[0]} failed (bench will compile it): {warm_failure(proc.returncode, out)}")
            return "failed"
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    pool = ThreadPoolExecutor(max(1, compile_workers))
    try:
        counts = dict(collections.Counter(pool.map(one, jobs)))
        if times:  # where a worker's time goes (the rest of its wall time is interpreter start and exit)
            wall, last = max(times)
            tqdm.write(f"warm-up: slowest worker {wall:.0f} s wall ({last})")
        return counts
    except BaseException:
        stop_warm()  # Ctrl-C / SIGTERM: stop the workers this process started
        raise
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        procs[:] = [proc for proc in procs if proc.poll() is None]


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--_warm":
        sys.exit(warm_child(sys.argv[2]))
    sys.exit(__doc__.strip())
