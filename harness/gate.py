"""gate.py: call times measured by the parent's own clock through a gate on the runner's stream (Options.clock="gate";
the strict protocol on a GPU). No timing code of the runner is involved, so a candidate that rewrites it gains nothing.

A 4 KiB page of shared memory (memfd: shmem, which the driver can pin; never a /dev/shm path, which bubblewrap makes
private, nor a file, whose writable pages recent kernels refuse to pin) is made by the parent (Page) and handed to the
runner at its fork. Three uint32 words, one cache line each: GATE (the parent writes), DONE (the GPU writes), ARMED
(the runner's host writes). One timed call (RunnerGate.call, timed_ask):
  runner: fresh inputs, L2 flush, device sync; on its stream: wait until GATE >= id (cuStreamWaitValue32), the model,
          the output's copy into the judge's buffer and its checksum, DONE = id (cuStreamWriteValue32); then ARMED = id
          from the host, a device sync, the reply (checksum read back);
  parent: sends the call, polls ARMED until the arming deadline (the null model's send-to-armed time +
          HOST_ALLOWANCE_US: like the strict spin, that much host time before the gate opens is launch latency hidden;
          beyond it the gate opens anyway and the rest is timed), t0, GATE = id, busy-polls DONE (t1), the reply.
A call counts (t1 - t0) - fixed (the median of the same interval on a null model that returns preallocated tensors of
the reference output's layout, in the same runner before the candidate is imported), plus the reply's delay after
DONE beyond the null's by more than GAP_TOL_US (work left on any stream, or a DONE written early from the host: the
runner's device-wide sync before the reply waits for it). A poll that lost the CPU (GIL, OS) between two reads around
DONE is counted as read (it only lengthens the call) and counted in the record (`stale`).
Bound per call (nothing of it needs a claim): a DONE forged early gains <= GAP_TOL_US; work done before the gate
opens (a side stream, the gate word written by the runner itself, work fused with the inputs' making) gains
<= pre_ms + HOST_ALLOWANCE_US, pre_ms (recorded: the null's send-to-armed time) holding the inputs' making, the flush
and a sync; a pool of input sets, the one used chosen inside the window, would take pre_ms out (next step). Not
covered: outputs left unfinished on calls the judge does not check (as with every clock here: one per round).
On the CPU device the gate does not apply (the runner's CPU time counts, harness/README.md).
"""
import contextlib, ctypes, mmap, os, select, statistics, time

import torch

from harness import kernel_eval

PAGE = 4096
GATE, DONE, ARMED = 0, 16, 32        # uint32 word indexes: bytes 0, 64, 128, one cache line each
HOST_ALLOWANCE_US = 200.0            # host time before the gate opens that is not charged (runner.SPIN_US's rule)
GAP_TOL_US = 50.0                    # a reply later after DONE than the null's by more than this: the excess counts
STALE_US = 20.0                      # a poll gap around DONE above this marks the call stale (read long, never short)
NULL_WARMUP, NULL_CALLS = 10, 31       # the null model's calls: warm-up (clocks up), then the calibrating ones
ARM_FIRST_MS = 50.0                  # the arming deadline before the null calibrated it (warm-up: lazy loading)
_SOCKET_EVERY = 1024                 # polls of DONE between two looks at the runner's socket (a reply without DONE)
HOST_ENV = "CUDAL1_GATE_HOST"       # set: the CPU device gets the gate too, the runner's host playing the stream
SLOW_NS = 1_000_000_000              # after this long DONE is polled every 0.5 ms (0.05% of such a call), not busily


def requested(options):
    """True when options (options.Options) ask for the gate and it can apply: a GPU (or the CPU device with HOST_ENV
    set: RunnerGate's host stand-in, for tests), the strict protocol, timed calls (not check_only, not a build ahead).
    $CUDAL1_CLOCK ("claims" | "gate") overrides options.clock."""
    clock = os.environ.get("CUDAL1_CLOCK") or options.clock
    return clock == "gate" and (options.device != "cpu" or bool(os.environ.get(HOST_ENV))) and \
        options.protocol == "strict" and not (options.build_only or options.check_only)


class Page:
    """The parent's page: a memfd of PAGE bytes, mapped; `fd` is handed to the runner at its fork (forkserver)."""

    def __init__(self):
        self.fd = os.memfd_create("cudal1_gate")
        os.ftruncate(self.fd, PAGE)
        self.mm = mmap.mmap(self.fd, PAGE)
        self.words = memoryview(self.mm).cast("I")
        self.call_id = 0

    def close(self):
        """Unmapped and its fd closed (also when the Page is dropped: the evaluation's end)."""
        if self.fd is not None:
            self.words.release()
            self.mm.close()
            os.close(self.fd)
            self.fd = None

    def __del__(self):
        with contextlib.suppress(Exception):
            self.close()


class Times:
    """perf_counter_ns stamps of one gated call: send, armed (None: the deadline opened the gate), gate, done (None:
    the reply came without it), reply; stale_ns: the poll gap around DONE; event_ms: the runner's CUDA-event figure
    (a diagnostic)."""
    __slots__ = ("send", "armed", "gate", "done", "reply", "stale_ns", "event_ms")

    def __init__(self, send):
        self.send, self.armed, self.gate, self.done, self.reply, self.stale_ns = send, None, None, None, None, 0
        self.event_ms = None


def _readable(sock):
    return bool(select.select([sock], [], [], 0)[0])


def timed_ask(worker, page, cmd, arm_ns, timeout, mem_limit=None):
    """One gated call of `worker` (workers.Worker): (reply, Times). arm_ns: ns after the send at which the gate
    opens if the runner has not armed. Raises workers.WorkerError as Worker.ask does."""
    page.call_id += 1
    cid, words = page.call_id, page.words
    times = Times(time.perf_counter_ns())
    worker.send(dict(cmd, call_id=cid))
    arm_by = times.send + arm_ns
    while True:
        now = time.perf_counter_ns()
        if words[ARMED] == cid:
            times.armed = now
            break
        if now >= arm_by:
            break
        os.sched_yield()                            # a thread that shares this core (the runner's) runs first
    times.gate = time.perf_counter_ns()
    words[GATE] = cid
    last, polls, end_by, replied = times.gate, 0, times.send + int(timeout * 1e9), False
    while True:
        seen = words[DONE] == cid
        now = time.perf_counter_ns()
        if seen:
            times.done, times.stale_ns = now, now - last
            break
        if replied or now > end_by:
            break                                   # a reply without DONE (an error), or a hang
        last, polls = now, polls + 1
        if now - times.gate < SLOW_NS:
            os.sched_yield()
            replied = polls % _SOCKET_EVERY == 0 and _readable(worker.sock)
        else:                                       # a long call: polled every 0.5 ms, its host memory watched
            worker.check_memory(mem_limit)
            replied = bool(select.select([worker.sock], [], [], 0.0005)[0])
    while times.done is not None and not _readable(worker.sock) and time.perf_counter_ns() < end_by:
        os.sched_yield()                            # the reply's arrival, busy-polled (no wake-up latency)
    times.reply = time.perf_counter_ns()
    reply, _ = worker.ask(None, max(0.001, (end_by - times.reply) / 1e9), mem_limit)
    return reply, times


class Calibration:
    """From the null model's gated calls (medians, ns): pre (send to armed), fixed (gate to done), gap (done to
    reply). arm_ns: the arming deadline after the send."""

    def __init__(self, rows):
        rows = [t for t in rows if t.armed is not None and t.done is not None]
        if len(rows) < 3:
            raise RuntimeError(f"the gate's calibration: {len(rows)} null calls armed and done (at least 3 needed)")
        self.pre = statistics.median(t.armed - t.send for t in rows)
        self.fixed = statistics.median(t.done - t.gate for t in rows)
        self.gap = statistics.median(t.reply - t.done for t in rows)
        self.arm_ns = int(self.pre + HOST_ALLOWANCE_US * 1e3)

    def call_ms(self, t):
        """(counted ms, tail ms charged) of one call: gate to DONE less the fixed cost (at least 1 us: the gate
        resolves nothing finer), plus the reply's delay beyond the null's when it exceeds GAP_TOL_US. A call without
        DONE raises ValueError (its DONE was suppressed: only a tampered runner replies without it)."""
        if t.done is None:
            raise ValueError("the call's DONE word never came though the runner replied")
        tail = max(0.0, (t.reply - t.done) - self.gap)
        tail = tail if tail > GAP_TOL_US * 1e3 else 0.0
        return max(1e-3, (t.done - t.gate - self.fixed) / 1e6) + tail / 1e6, tail / 1e6

    def summary(self, rows):
        """The record's clock fields of gated calls `rows` (Times)."""
        tails = [self.call_ms(t)[1] for t in rows if t.done is not None]
        events = [t.event_ms for t in rows if t.event_ms is not None]
        return dict(kind="gate", event_ms=round(statistics.median(events), 5) if events else None,
                    fixed_ms=round(self.fixed / 1e6, 5), pre_ms=round(self.pre / 1e6, 5),
                    gap_ms=round(self.gap / 1e6, 5), late_arms=sum(t.armed is None for t in rows),
                    tails=sum(x > 0 for x in tails), tail_ms=round(sum(tails), 5),
                    stale=sum(t.stale_ns > STALE_US * 1e3 for t in rows), calls=len(rows))


# ------------------------------------------------------------------------------------------ the runner's side

_DRIVER = []


def _driver():
    """libcuda.so.1 through ctypes, with the few entry points used here typed (their _v2 names where they exist)."""
    if not _DRIVER:
        lib = ctypes.CDLL("libcuda.so.1")
        fns = {}
        for name, args in (("cuMemHostRegister", [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint]),
                           ("cuMemHostGetDevicePointer", [ctypes.POINTER(ctypes.c_uint64), ctypes.c_void_p,
                                                          ctypes.c_uint]),
                           ("cuStreamWaitValue32", [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint]),
                           ("cuStreamWriteValue32", [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32,
                                                     ctypes.c_uint])):
            fn = getattr(lib, name + "_v2", None) or getattr(lib, name)
            fn.argtypes, fn.restype = args, ctypes.c_int
            fns[name] = fn
        lib.cuInit(0)                               # (torch did it already in a runner on a GPU: harmless)
        lib.cuGetErrorString.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        fns["error"] = lib.cuGetErrorString
        _DRIVER.append(fns)
    return _DRIVER[0]


def _cu(rc, what):
    if rc != 0:
        msg = ctypes.c_char_p()
        _driver()["error"](rc, ctypes.byref(msg))
        raise RuntimeError(f"{what} failed: CUresult {rc} {(msg.value or b'').decode(errors='replace')}")


class NullModel:
    """Returns preallocated zero tensors of the reference output's layout (the judge's [(offset, nbytes, dtype,
    shape)]): its gated calls cost what a call costs around the model (inputs, copy, checksum, polls)."""

    def __init__(self, layout, dev):
        self.out = [torch.zeros(shape, dtype=getattr(torch, dtype), device=dev) for _, _, dtype, shape in layout]

    def __call__(self, *inputs):
        return self.out[0] if len(self.out) == 1 else tuple(self.out)


class RunnerGate:
    """The runner's side: the page (fd from the parent) mapped and pinned (cuMemHostRegister DEVICEMAP|PORTABLE),
    its device address, an L2 flush buffer. Raises RuntimeError where the driver refuses (no stream memory ops) or
    the output exchange is not CUDA IPC. On the CPU device (HOST_ENV) the host plays the stream."""

    def __init__(self, fd, dev, exchange):
        self.dev, self.host = dev, dev.type != "cuda"
        self.mm = mmap.mmap(fd, PAGE)
        self.words = memoryview(self.mm).cast("I")
        if self.host:
            return
        if exchange is None or exchange.ptr is None:
            raise RuntimeError("the output exchange is not CUDA IPC (a file): no gate")
        torch.zeros(1, device=dev)                             # the primary context, current on this thread
        host = ctypes.addressof(ctypes.c_char.from_buffer(self.mm))
        drv = _driver()
        _cu(drv["cuMemHostRegister"](host, PAGE, 0x1 | 0x2), "cuMemHostRegister")   # PORTABLE | DEVICEMAP
        dptr = ctypes.c_uint64()
        _cu(drv["cuMemHostGetDevicePointer"](ctypes.byref(dptr), host, 0), "cuMemHostGetDevicePointer")
        self.dptr = dptr.value
        l2 = getattr(torch.cuda.get_device_properties(dev), "L2_cache_size", 0)
        self.flush_buf = torch.empty(2 * l2 if l2 > 0 else 256 << 20, dtype=torch.uint8, device=dev)
        self.events = [torch.cuda.Event(enable_timing=True) for _ in range(2)]

    def call(self, model, inputs, call_id, exchange, leaves):
        """One gated call (module docstring); exchange: the runner's Exchange; leaves(out): the output's leaves.
        Returns (ms by CUDA events on the stream from the gate to the model's return: a diagnostic, never counted;
        checksum; memory orders of the leaves; the output); checksum and orders None when the output does not fit
        the judge's layout (the judge names the mismatch from the output's meta)."""
        if self.host:
            return self._host_call(model, inputs, call_id, exchange, leaves)
        drv, stream = _driver(), torch.cuda.current_stream(self.dev)
        kernel_eval.l2_flush(self.flush_buf)
        torch.cuda.synchronize()
        _cu(drv["cuStreamWaitValue32"](stream.cuda_stream, self.dptr + 4 * GATE, call_id, 0x0), "wait")  # GEQ
        start, end = self.events
        start.record(stream)
        out = model(*inputs)
        end.record(stream)
        with torch.cuda.stream(stream):            # the gated stream, whatever the model left current
            try:
                flat = exchange.copy([x for x in leaves(out) if isinstance(x, torch.Tensor)], stream.cuda_stream)
            except ValueError:
                flat = None
            acc = kernel_eval.checksum_start(flat) if flat else None
        _cu(drv["cuStreamWriteValue32"](stream.cuda_stream, self.dptr + 4 * DONE, call_id, 0x0), "write")
        self.words[ARMED] = call_id
        torch.cuda.synchronize()                   # the whole device: work left on other streams delays the reply
        if flat is None:
            return start.elapsed_time(end), None, None, out
        cs = kernel_eval.checksum_value(acc) if flat else 0          # no tensor leaf: the sum of nothing
        return start.elapsed_time(end), cs, exchange.orders, out

    def _host_call(self, model, inputs, call_id, exchange, leaves):
        """call() on the CPU device, the host in the stream's place: armed, the gate awaited, the model, the output
        delivered, DONE. It tests the protocol's plumbing end to end; a host can forge every word, so it is no clock
        to trust (hence opt-in by HOST_ENV alone)."""
        self.words[ARMED] = call_id
        while self.words[GATE] < call_id:
            os.sched_yield()
        out = model(*inputs)
        try:
            flat = exchange.copy([x for x in leaves(out) if isinstance(x, torch.Tensor)])
        except ValueError:
            flat = None
        self.words[DONE] = call_id
        return 0.0, None if flat is None else kernel_eval.checksum(flat), exchange.orders, out


# ------------------------------------------------------------------------------------------ the parent's side

class SessionGate:
    """The gate of one evaluation (session.Session): its page, the calibration, every gated call's Times (rows:
    the reference's then the candidate's, once calibrated). why: the reason the runner could not arm it or its
    calibration failed (then claims count), or None."""

    def __init__(self):
        self.page, self.calib, self.rows, self.null_rows, self.why = Page(), None, [], [], None

    def arm(self, session):
        """The runner pins the page (its `gate` command, after the output exchange is open). Returns False, with
        `why` set, where it cannot (no CUDA IPC, the driver refuses)."""
        r, _ = session.ask(dict(op="gate"))
        self.why = None if r["ok"] else r["error"]
        return bool(r["ok"])

    def ask(self, worker, cmd, timeout, mem_limit=None):
        """One gated call: (reply, wall s from the send to the reply). Once calibrated, reply["ms"] is the counted
        ms (Calibration.call_ms) and the runner's own figure is kept as reply["event_ms"]. Raises ValueError for a
        reply without DONE, workers.WorkerError as Worker.ask does."""
        arm_ns = self.calib.arm_ns if self.calib else int(ARM_FIRST_MS * 1e6)
        reply, t = timed_ask(worker, self.page, cmd, arm_ns, timeout, mem_limit)
        self.rows.append(t)
        t.event_ms = reply.get("ms") if isinstance(reply.get("ms"), (int, float)) else None
        if self.calib is not None and reply.get("ok"):
            reply = dict(reply, event_ms=reply.get("ms"), ms=self.calib.call_ms(t)[0])
        return reply, (t.reply - t.send) / 1e9

    def calibrate(self, session):
        """The null model's gated calls in session's runner (its ask, rng, hang), before the candidate is imported:
        the fixed costs every later call is counted against. Returns False, with `why` set, when the null model's
        calls fail (e.g. the driver refuses a stream operation): then claims count."""
        r, _ = session.ask(dict(op="models", reference=True, null=True))
        start = len(self.rows)
        for _ in range(NULL_WARMUP + NULL_CALLS):
            if r.get("ok"):
                r, _ = session.ask(dict(op="call", seed=session.rng.randrange(2 ** 31), protocol="strict"),
                                   session.hang)
        try:
            if not r.get("ok"):
                raise RuntimeError(f"the null model's gated call failed: {r.get('error')}")
            self.calib = Calibration(self.rows[start + NULL_WARMUP:])
        except RuntimeError as e:
            self.why = str(e)[:300]
            return False
        self.null_rows, self.rows = self.rows[start:], []
        return True

    def record(self, n_ref):
        """The record's clock fields: the candidate's gated calls (after the reference's first n_ref), and the
        reference's under "ref"."""
        ref = self.calib.summary(self.rows[:n_ref])
        return dict(self.calib.summary(self.rows[n_ref:]), ref={k: ref[k] for k in ("late_arms", "tails", "stale")})
