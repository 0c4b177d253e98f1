"""runner.py: the runner, the process where a candidate runs. Everything in this file may run in a process where
candidate code runs.

Trust: once a candidate is imported, this process is the candidate's. It can patch any function here, read every
frame, write any file the user can and call any C function. So nothing this process says is believed: it only
*reports raw measurements and outputs* to the parent (session.py), through a socket, as size-limited JSON frames
(never pickle), and the parent and the judge (judge.py, a process where no candidate code ever runs) decide:
  - outputs are copied into a buffer the judge allocated and compared there with the judge's own reference, computed
    from inputs the judge generates itself from the same seed (so a forged "correct" costs a real correct answer);
  - the parent reveals each timed call's input seed only when it asks for that call and measures every call with its
    own clock. The reference's timed calls run in this same process, through the same Clock.call, BEFORE the
    candidate is imported (session.Session.reference), so they are clean and calibrate the per-call overhead; the
    candidate's claimed times are checked against the parent's clock, and a contradiction is the hack
    `clock_mismatch` (session.Session.verdict);
  - the checks made here (exact tensor type, aliasing, input mutation, backend flags, patched timer functions, side
    caught build failures) are a first filter for honest mistakes and ordinary hacks, not the defence.

Shared with judge.py (the same code on both sides): the frames (send, recv) and the per-call clocks of the three
protocols (Clock.call; the judge uses it for a first estimate of the reference's time, never for the counted one);
the backend flags, the models, the inputs and the outputs' descriptions are in task_io.py, the cudart helpers and the
output exchange (Exchange) in exchange.py, both shared too. Also here: serve(), the runner's command loop; the build
cache (buildcache.py) replaces torch's load_inline in every runner before the candidate is imported.

Timing of one "strict" call (REFERENCE.md §2, §4): fresh inputs from the revealed seed; the L2 is
flushed (a 2x L2 write; persisting lines reset); then `pre` event, a ~SPIN_US device spin, `start` event; the host
waits until `pre` has passed (the flush is done) and calls the model while the spin runs, so the model's launches are
queued before `start` executes and the window holds device time, not launch latency; `end` is recorded right after
the call on the current stream; the host busy-waits until `end` has passed, then synchronises the whole device and
times that on its own clock: work still running on other streams or threads after `end` lengthens the synchronise
beyond its calibrated idle cost, and that excess is charged to the call (busy-waiting first keeps the OS's wake-up
latency after a blocking wait out of it). A side stream can hide at most the spin's remainder (<= SPIN_US) per call.
"""
import json, os, re, statistics, struct, sys, time

import torch

from harness import cores
from harness import exchange
from harness import gate_device
from harness import kernel_eval
from harness import task_io

buildcache = None   # the buildcache module, handed to main() by the fork server after the fork: importing
                    # cpp_extension calls torch.cuda.is_available(), after which torch refuses CUDA in forked
                    # children (so never in the fork server itself)
_ERR_CHARS = 2000

SPIN_US = float(os.environ.get("CUDAL1_SPIN_US") or 200.0)  # device spin before `start` (us): the model's launches
                         # queue during it (launch latency hidden). 40 us was too short after an idle gap: a 10 us
                         # kernel read 104 us (scripts/diag_clock.py on the H200); CUDAL1_SPIN_US is for that script
TAIL_TOL_US = 20.0       # a device synchronise after `end` longer than its idle cost by more than this = work left
                         # (host jitter after a device sync stays under it; leftover work above it is charged)
MAX_FRAME = 8 << 20      # bytes of one JSON message; a bigger one is a protocol violation


# ------------------------------------------------------------------------------------------- messages, errors

def send(sock, obj):
    """One frame: 4-byte big-endian length, then UTF-8 JSON."""
    data = json.dumps(obj, allow_nan=True, default=str).encode()
    sock.sendall(struct.pack(">I", len(data)) + data)


def recv(sock):
    """The next frame as a dict; EOFError when the peer closed; ValueError for a malformed frame."""
    head = _recv_exact(sock, 4)
    n = struct.unpack(">I", head)[0]
    if n > MAX_FRAME:
        raise ValueError(f"frame of {n} bytes (limit {MAX_FRAME})")
    obj = json.loads(_recv_exact(sock, n))
    if not isinstance(obj, dict):
        raise ValueError(f"frame is a {type(obj).__name__}, not an object")
    return obj


def _recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError("peer closed the connection")
        buf += chunk
    return buf


def truncate(s, n=_ERR_CHARS):
    """Keeps the first compiler `error` (the useful line of a failed build) or else the tail (a traceback)."""
    s = str(s)
    if len(s) <= n:
        return s
    i = s.find("error")
    start = max(0, i - 300) if i >= 0 else len(s) - n
    return ("..." if start else "") + s[start:start + n] + ("..." if start + n < len(s) else "")


def default_build_root():
    return os.path.abspath(os.path.expanduser(os.environ.get("CUDAL1_BUILD_ROOT") or "~/.cache/cudal1/build"))


def _write_json(path, obj):
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(obj, f)
    os.replace(tmp, path)            # atomic: a reader never sees half a file


def describe(e):
    return dict(error=truncate(f"{type(e).__name__}: {e}"), error_type=type(e).__name__)


class Clock:
    """The per-call timing of the three protocols, the same for the reference and the candidate (both timed in the
    runner; the judge's first estimate of the reference's time uses it too).

    call(model, inputs) -> (ms, out): ms = the protocol's time of this call (module docstring for strict;
    kernelbench: flush, start, call, end on the current stream, end.synchronize(), REFERENCE.md §2; cudal1: device
    sync, start, call, device sync, end, no flush, §1.7). On CPU, the calling thread's CPU time around the call
    (time.thread_time; torch runs one thread here): a call preempted on a busy box claims no more than it ran, so
    the parent's clock (the worker's CPU time, workers.Worker.cpu_s) sees only the fixed overhead beyond it."""

    def __init__(self, dev, protocol):
        self.dev, self.protocol, self.cuda = dev, protocol, dev.type == "cuda"
        self.spin_cycles, self.idle_tail_ms, self.flush_buf = 0, 0.0, None
        if self.cuda:
            E = torch.cuda.Event
            self.events = [E(enable_timing=True) for _ in range(4)]         # pre, start, end, after
            if protocol != "cudal1":
                l2 = getattr(torch.cuda.get_device_properties(dev), "L2_cache_size", 0)
                self.flush_buf = torch.empty(2 * l2 if l2 > 0 else 256 << 20, dtype=torch.uint8, device=dev)
            self._calibrate()

    def _calibrate(self):
        """Spin cycles per SPIN_US (at working clocks: the GPU is kept busy first), and the cost of a device-wide
        synchronise on an idle device (both medians). call() re-sizes the spin whenever it ran short."""
        pre, start, end, after = self.events
        for _ in range(20):
            kernel_eval.spin(1_000_000, self.dev)
        rates = []
        for _ in range(3):
            torch.cuda.synchronize()
            start.record()
            kernel_eval.spin(200_000, self.dev)
            end.record()
            end.synchronize()
            rates.append(200_000 / max(start.elapsed_time(end) * 1e3, 1e-3))       # cycles per us
        self.spin_cycles = self.spin_cycles0 = int(statistics.median(rates) * SPIN_US)
        tails = []
        for _ in range(15):
            end.record()
            tails.append(self._tail(end))
        self.idle_tail_ms = statistics.median(tails)

    @staticmethod
    def _tail(end):
        """ms the host's device-wide synchronise takes once `end` has passed (busy-wait: no OS wake-up in it)."""
        while not end.query():
            pass
        t0 = time.perf_counter()
        torch.cuda.synchronize()                          # the whole device: other streams and threads too
        return (time.perf_counter() - t0) * 1e3

    def flush(self):
        if self.flush_buf is not None:
            kernel_eval.l2_flush(self.flush_buf)          # persisting lines reset, then 2x L2 bytes written

    def call(self, model, inputs):
        if not self.cuda:
            t0 = time.thread_time()
            out = model(*inputs)
            return (time.thread_time() - t0) * 1e3, out
        pre, start, end, after = self.events
        if self.protocol == "strict":
            self.flush()
            pre.record()
            kernel_eval.spin(self.spin_cycles, self.dev)
            start.record()
            while not pre.query():                        # the flush is done; the spin is running
                pass
            out = model(*inputs)
            end.record()
            tail = self._tail(end) - self.idle_tail_ms
            ms = start.elapsed_time(end)
            spin = pre.elapsed_time(start)
            if spin < 0.8 * SPIN_US / 1e3:                # clocks went up since calibration: spin longer (at most
                self.spin_cycles = min(int(self.spin_cycles * SPIN_US / 1e3 / max(spin, 1e-4)),   # 4x: a candidate
                                       4 * self.spin_cycles0)                                   # may fake the timer
            return ms + (tail if tail > TAIL_TOL_US / 1e3 else 0.0), out
        if self.protocol == "kernelbench":
            self.flush()
            torch.cuda.synchronize()
            start.record()
            out = model(*inputs)
            end.record()
            end.synchronize()                             # KernelBench: the current stream only
            return start.elapsed_time(end), out
        torch.cuda.synchronize()                          # cudal1
        start.record()
        out = model(*inputs)
        torch.cuda.synchronize()
        end.record()
        end.synchronize()
        return start.elapsed_time(end), out


# ----------------------------------------------------------------------------------------- first-filter checks

_WATCHED = ["torch.cuda.synchronize", "torch.cuda.Event", "torch.cuda.Event.record", "torch.cuda.Event.elapsed_time",
            "torch.cuda.Event.synchronize", "torch.cuda.Event.query", "kernel_eval.spin", "torch.allclose",
            "torch.isclose", "torch.equal", "time.perf_counter", "time.thread_time", "json.dumps", "os._exit",
            "sys.exit", "runner.Clock.call", "exchange.Exchange.write", "exchange.checksum", "runner.send",
            "task_io.make_inputs", "runner._deliver", "runner._handle", "kernel_eval.l2_flush",
            "kernel_eval.checksum", "exchange.torch", "exchange.kernel_eval", "task_io.torch", "task_io.sys"]
# (exchange.torch...: exchange.py and task_io.py reach torch, kernel_eval and sys through globals of their own)
# sources that may launch kernels the extension-call count cannot see (a driver launch through ctypes, Triton...):
# with no counted call their custom_kernel_calls is None (unknown), not 0; the verdict is left alone
_UNCOUNTABLE = re.compile(r"triton|cupy|numba|ctypes|torch\.ops\.|cuda\.core|pycuda|tilelang|cutlass")


def _watched():
    me = sys.modules[__name__]
    owners = {"torch": torch, "torch.cuda": torch.cuda, "torch.cuda.Event": torch.cuda.Event, "time": time,
              "json": json, "os": os, "sys": sys, "runner": me, "runner.Clock": Clock, "exchange": exchange,
              "exchange.Exchange": exchange.Exchange, "task_io": task_io, "kernel_eval": kernel_eval}
    return {n: getattr(owners[n.rsplit(".", 1)[0]], n.rsplit(".", 1)[1], None) for n in _WATCHED}


# --------------------------------------------------------------------------------------------- the runner

def serve(sock, spec):
    """The runner's command loop. Commands from the parent, one reply each:
      import [task_only] the task (for get_inputs / get_init_inputs) and the candidate (builds through the cache);
                         task_only: the task alone (the reference is timed before the candidate is imported)
      prebuild           (build-only runners) ModelNew on the meta device: builds made in __init__ happen here
      models [reference] ModelNew under manual_seed(42) and the fixed backend flags, then the protocol's Clock;
                         reference: the task's Model instead, under the fixed flags (its calls likewise)
      exchange {spec}    open the judge's output buffer
      trial {seed}       one checked call: memory poisoned first, the call, a device sync, the output delivered
                         (checksum in the reply), first-filter findings
      call {seed}        one timed call under the protocol, the output delivered (ms and checksum in the reply)
      report             first-filter findings since import | exit
    The parent decides after a reply whether the judge checks that output; nothing here knows in advance."""
    dev = torch.device(spec["device"])
    state = dict(task=None, cand=None, model=None, ex=None, clock=None, inputs=(None, None),   # the runner's
                 flags=dict(task_io.FIXED_FLAGS, **(spec.get("flags_override") or {})))        # state (_handle)
    send(sock, dict(op="hello", pid=os.getpid(), t=time.time()))
    while True:
        try:
            cmd = recv(sock)
        except (EOFError, ValueError, OSError):
            return
        try:
            reply = _handle(cmd, state, spec, dev)
        except Exception as e:
            reply = dict(ok=False, **describe(e))
        if reply is None:
            return
        send(sock, reply)


def _handle(cmd, state, spec, dev):
    op, cuda = cmd.get("op"), dev.type == "cuda"
    if op == "import":
        task_io.set_flags(task_io.FIXED_FLAGS)
        if state["task"] is None:
            state["task"] = task_io.load_module(spec["task_path"], "cudal1_task")
        if cmd.get("task_only"):          # (no CUDA context yet: made here, before the GPU's lock, beside another
            return dict(ok=True)          # evaluation's timed calls, it hid a shaved clock: judge_clock_shave earned
                                          # 1.41x in 2 of 2 GPU suites)
        cores.pin(cores.BUILD_CPUS)                       # off the timing cores again after the reference's calls
        state["watched"] = _watched()                      # before any candidate code runs
        t0 = time.perf_counter()
        task_io.set_flags(state["flags"])
        try:
            state["cand"] = task_io.load_module(spec["candidate_path"], "cudal1_candidate")
        except BaseException as e:
            build = isinstance(e, (buildcache.BuildError, SyntaxError)) or bool(buildcache.BUILD_FAILURES)
            return dict(ok=False, compile_error=build, compile_s=time.perf_counter() - t0, **describe(e))
        return dict(ok=True, compile_s=time.perf_counter() - t0, build_failures=buildcache.BUILD_FAILURES[:3],
                    has_modelnew=hasattr(state["cand"], "ModelNew"), flags=task_io.get_flags())
    if op == "prebuild":      # build-only runners: ModelNew made on the meta device (no memory, no kernel runs), so
        t0 = time.perf_counter()  # that load_inline calls in __init__ build here, not in the timed runner's `models`
        try:                      # step under the GPU's lock (in the CUDA-L1 A100 audit: up to 110 s there)
            with torch.no_grad():
                task_io.build_model(state["task"], state["cand"].ModelNew, torch.device("meta"))
            err = None
        except Exception as e:    # meta tensors break many an __init__ after its builds: the timed runner decides
            err = describe(e)
        return dict(ok=True, build_s=time.perf_counter() - t0, error=err, build_failures=buildcache.BUILD_FAILURES[:3])
    if op == "models":                # under the GPU's lock from here on: onto the timing cores (cores.py)
        cores.pin((spec.get("cpus") or {}).get("timed"))
        state["reference"] = bool(cmd.get("reference"))
        state["model"], state["inputs"] = None, (None, None)   # the reference's model and inputs: memory back first
        if cuda:
            torch.cuda.empty_cache()
        with torch.no_grad():
            task_io.set_flags(task_io.FIXED_FLAGS if state["reference"] else state["flags"])
            cls = state["task"].Model if state["reference"] else state["cand"].ModelNew
            state["model"] = gate_device.NullModel(state["ex"].spec["layout"], dev) if cmd.get("null") else \
                task_io.build_model(state["task"], cls, dev)      # null: gate.py's fixed costs, before the candidate
        return dict(ok=True, flags=task_io.get_flags(), build_failures=buildcache.BUILD_FAILURES[:3])
    if op == "exchange":
        state["ex"] = exchange.Exchange(cmd["spec"])
        return dict(ok=True)
    if op == "gate":                      # the pages handed over at the fork, pinned; the judge's input buffer mapped
        inputs = cmd["inputs"]           # (gate_device.py): timed calls open their sealed inputs into this runner's own
        state["gate"] = gate_device.RunnerGate(spec["done_fd"], spec["gate_fd"], dev, state["ex"],
                                               gate_device.open_buffer(inputs), inputs["layout"],
                                               task_io.make_inputs(state["task"], task_io.SEED, dev))
        return dict(ok=True)
    if op == "trial":
        inputs = task_io.make_inputs(state["task"], cmd["seed"], dev)
        fp = task_io.fingerprint(inputs)
        if cuda:                                          # poison what the allocator may hand out next (§4)
            blocks = [torch.empty(max(int(n), 1), dtype=torch.uint8, device=dev) for n in cmd.get("poison", [])]
            for b in blocks:
                kernel_eval.poison_fill(b)                # NaN in every float type
            blocks.clear()                                # back to the allocator, poisoned
            torch.cuda.synchronize()
        calls0 = buildcache.EXT_CALLS[0]
        task_io.set_flags(state["flags"])
        with torch.no_grad():
            out = state["model"](*inputs)
        if cuda:
            torch.cuda.synchronize()                      # device-wide: side-stream work is finished too
        flags = task_io.get_flags()
        tensors = [x for x in task_io.leaves(out) if isinstance(x, torch.Tensor)]
        reply = dict(ok=True, meta=task_io.meta(out), custom_kernel_calls=buildcache.EXT_CALLS[0] - calls0, flags=flags,
                     input_shapes=[list(x.shape) if isinstance(x, torch.Tensor) else repr(x)[:40] for x in inputs],
                     aliases=any(task_io.aliases(t, inputs) for t in tensors if t.numel()),
                     no_storage=any(bool(t.numel()) and (t.untyped_storage().nbytes() == 0 or t.data_ptr() == 0)
                                    for t in tensors),
                     input_mutated=task_io.fingerprint(inputs) != fp)
        reply["checksum"], reply["order"] = _deliver(state, out)
        return reply
    if op == "call" and cmd.get("call_id") is not None:     # timed by the parent through the gate (gate.py): the
        with torch.no_grad():                               # inputs are the judge's to deliver; ms is not counted
            task_io.set_flags(task_io.FIXED_FLAGS if state.get("reference") else state["flags"])
            ms, cs, order, out = state["gate"].call(state["model"], cmd["call_id"], state["ex"], task_io.leaves)
            return dict(ok=True, ms=ms, checksum=cs, order=order, meta=task_io.meta(out), stages=state["gate"].stages)
    if op == "call":
        with torch.no_grad():
            seed = cmd["seed"]
            inputs = state["inputs"][1] if seed == state["inputs"][0] else task_io.make_inputs(state["task"], seed, dev)
            state["inputs"] = (seed, inputs) if spec["protocol"] == "kernelbench" else (None, None)
            if state["clock"] is None:                    # made here, under the GPU's lock: its calibration
                state["clock"] = Clock(dev, spec["protocol"])  # runs GPU work
            task_io.set_flags(task_io.FIXED_FLAGS if state.get("reference") else state["flags"])
            ms, out = state["clock"].call(state["model"], inputs)
            cs, order = _deliver(state, out)
            return dict(ok=True, ms=ms, checksum=cs, order=order, meta=task_io.meta(out))
    if op == "report":
        now = _watched()
        cand_src = open(spec["candidate_path"]).read()
        uncountable = bool(buildcache.EXT_UNCOUNTED) or bool(_UNCOUNTABLE.search(cand_src))
        return dict(ok=True, flags=task_io.get_flags(),
                    patched=[n for n, f in now.items() if f is not state["watched"][n]],
                    uncountable=uncountable, build_failures=buildcache.BUILD_FAILURES[:3])
    if op == "exit":
        return None
    return dict(ok=False, error=f"unknown command {op!r}", error_type="Protocol")


def _deliver(state, out):
    """The output into the judge's buffer: (its checksum, the memory order of each tensor leaf: dense_order), or
    (None, None) when its structure cannot fit the buffer (the judge then reports the structure mismatch from
    `meta`)."""
    tensors = [x for x in task_io.leaves(out) if isinstance(x, torch.Tensor)]
    try:
        return state["ex"].write(tensors), state["ex"].orders
    except ValueError:
        return None, None


def main(sock, spec, build_cache):
    """Entry point of a forked runner: the build cache first (the buildcache module, imported by the fork server
    after the fork), then the command loop; never returns."""
    global buildcache
    buildcache = build_cache
    if spec.get("kernel_eval"):              # the evaluator's device code, by the path and hash the parent built
        kernel_eval.load(spec["kernel_eval"])
    buildcache.install_build_cache()
    cores.BUILD_CPUS[:] = (spec.get("cpus") or {}).get("start") or []
    cores.pin(cores.BUILD_CPUS)              # imports and builds off the timing cores (cores.py), and so are
                                             # builds made later under the GPU's lock (buildcache)
    if spec.get("nice"):                    # a build ahead (runner_steps.BUILD_NICE): nvcc and ninja inherit it
        os.nice(int(spec["nice"]))
    if spec["device"] == "cpu" and not os.environ.get("OMP_NUM_THREADS"):
        torch.set_num_threads(1)   # on a busy small box, OpenMP threads waiting for each other time the scheduler
    if spec["device"].startswith("cuda") and not os.environ.get("TORCH_CUDA_ARCH_LIST") and \
            torch.cuda.is_available():          # the arch of this GPU, explicitly: part of every cache key
        os.environ["TORCH_CUDA_ARCH_LIST"] = "%d.%d" % torch.cuda.get_device_capability()
    serve(sock, spec)
