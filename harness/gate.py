"""gate.py: call times measured by the parent's own clock through a gate on the runner's stream (Options.clock="gate";
the strict protocol on a GPU). No timing code of the runner is involved, so rewriting it gains nothing, and a timed
call's inputs cannot be read before its gate opens, so there is nothing to compute ahead.

Two pages of shared memory per evaluation (memfd: shmem, which the driver can pin), made by the parent, handed to the
runner at its fork: the gate page (GATE, KEY: the parent writes them; sealed with F_SEAL_FUTURE_WRITE once the parent
has mapped it, so the runner maps it read-only) and the done page (DONE from the runner's stream, ARMED and SYNCED from
its host). Before each timed call the judge makes the inputs from the call's seed and writes them XORed with the
keystream of a fresh random 64-bit key (kernel_eval.keystream_xor) into a buffer of its own (CUDA IPC; a file on the
CPU device); the runner never sees the seed, and the key leaves the parent only with GATE. One call (timed_ask):
  runner: on its stream: wait until GATE >= id (cuStreamWaitValue32), KEY read, the inputs opened into the runner's own
          tensors, the model, DONE = id; ARMED = id from the host, a device sync, SYNCED = id; then, outside the window
          and with every stream's work finished, the output's copy into the judge's buffer and its checksum, the
          reply (checksum read back). The L2 is flushed before the wait.
  parent: sends the call, polls ARMED until the arming deadline (the null's send-to-armed time + HOST_ALLOWANCE_US;
          past it the gate opens anyway and late launches are timed), writes KEY, t0, GATE = id, polls DONE (t1).
A call counts (t1 - t0) less the fixed cost (the median of that interval on a null model that writes fresh tensors of
the reference output's layout, less those writes' CUDA-event time, in the same runner before the candidate is
imported: the opening of the inputs is in it), plus the tail: SYNCED's delay after DONE beyond the null's when over
GAP_TOL_US (work left on any stream), or the reply's beyond the null's less REPLY_TOL_US (a runner rewritten to write
SYNCED before its sync), whichever is longer. The delivery stays out of the window because its cost depends on how
the output was written (16 MiB on the H200: 24 us at rest, 87 us just written by a kernel, 111 us by the null), which
no null matches within the strict protocol's 5%. DONE before the gate opened is named (ValueError). A poll that lost
the CPU around DONE is counted as read (it only lengthens the call) and counted in the record (`stale`).
Bound per call: work left after DONE on any stream gains <= GAP_TOL_US (it delays SYNCED, and the output is read
after the sync); a runner rewritten to write SYNCED before its device sync: <= REPLY_TOL_US plus what its own
delivery saves on the null's DONE-to-reply time (the record's gap_ms: 0.1-0.3 ms on the H200); work
before the gate (a side stream, a thread, the runner's call rewritten) sees only sealed bytes, so its answers are wrong
(one timed call per round is checked) unless it is input-independent, which a cache made in __init__ gives anyway. Not
covered: outputs left unfinished on calls the judge does not check; a kernel that polls KEY from before the gate and
overlaps the opening of the inputs (it competes with it for the SMs). On the CPU device the gate does not apply (the
runner's CPU time counts); HOST_ENV turns on a host stand-in that tests the plumbing (a host can forge every word).
"""
import contextlib, fcntl, mmap, os, secrets, select, statistics, time

PAGE = 4096
GATE, KEY = 0, 16                    # the gate page's uint32 words: GATE (bytes 0-3), KEY (bytes 64-71, two words)
DONE, ARMED, SYNCED = 16, 32, 48     # the done page's: bytes 64, 128, 192, each on a cache line of its own
HOST_ALLOWANCE_US = 200.0            # host time before the gate that is not charged: launches queued behind it; past
                                     # it the gate opens and the rest of the launches are timed
GAP_TOL_US = 20.0                    # SYNCED later after DONE than the null's by more than this: all of it counts
REPLY_TOL_US = 100.0                 # the reply later after DONE than the null's: what exceeds this counts (the
                                     # delivery's host work after a device sync varies: 54-158 us over the null's
                                     # median after 20-500 us kernels on the H200)
REF_TOL_US, REF_TOL_FRAC = 15.0, 0.05   # the reference's gated median may stray this far from its own events (us, a
                                     # share of them), else it is timed again (SessionGate.reference_strays)
STALE_US = 20.0                      # a poll gap around DONE above this marks the call stale (read long, never short)
NULL_WARMUP, NULL_CALLS = 10, 31     # the null model's calls: warm-up (clocks up), then the calibrating ones
ARM_FIRST_MS = 50.0                  # the arming deadline before the null calibrated it (warm-up: lazy loading)
_SOCKET_EVERY = 1024                 # polls between two looks at a worker's socket (a reply without the word)
HOST_ENV = "CUDAL1_GATE_HOST"       # set: the CPU device gets the gate too, the hosts playing the streams
SLOW_NS = 1_000_000_000              # after this long DONE is polled every 0.5 ms (0.05% of such a call), not busily
_SEAL_FUTURE_WRITE = 0x10            # F_SEAL_FUTURE_WRITE (Linux 5.1; not in Python's fcntl)


def requested(options):
    """True when options (options.Options) ask for the gate and it can apply: a GPU (or the CPU device with HOST_ENV
    set: the host stand-in, for tests), the strict protocol, timed calls (not check_only, not a build ahead).
    $CUDAL1_CLOCK ("claims" | "gate") overrides options.clock."""
    clock = os.environ.get("CUDAL1_CLOCK") or options.clock
    return clock == "gate" and (options.device != "cpu" or bool(os.environ.get(HOST_ENV))) and \
        options.protocol == "strict" and not (options.build_only or options.check_only)


class Page:
    """A page the parent makes: a memfd of PAGE bytes, mapped here; `fd` is handed to workers at their fork
    (forkserver). call_id: the last id used with it (the judge's page: ids only grow, GATE is compared with >=)."""

    def __init__(self):
        self.fd = os.memfd_create("cudal1_gate", os.MFD_ALLOW_SEALING)
        os.ftruncate(self.fd, PAGE)
        self.mm = mmap.mmap(self.fd, PAGE)
        self.words = memoryview(self.mm).cast("I")
        self.call_id, self.sealed = 0, False

    def seal(self):
        """From now on no process can map the page writable, write() it or resize it (mappings made before keep
        their rights: the parent's, the judge's). False where the kernel lacks F_SEAL_FUTURE_WRITE."""
        with contextlib.suppress(OSError):
            fcntl.fcntl(self.fd, fcntl.F_ADD_SEALS,
                        _SEAL_FUTURE_WRITE | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
            self.sealed = True
        return self.sealed

    def close(self):
        """Unmapped and its fd closed (also when the Page is dropped)."""
        if self.fd is not None:
            self.words.release()
            self.mm.close()
            os.close(self.fd)
            self.fd = None

    def __del__(self):
        with contextlib.suppress(Exception):
            self.close()


class Times:
    """perf_counter_ns stamps of one gated call: send, armed (None: the deadline passed), gate (GATE written), done
    (None: the reply came without it), synced (None: the reply came first), reply; stale_ns: the poll gap around
    DONE; early: DONE was there before the gate opened; event_ms, stages: the runner's CUDA-event figures (the model;
    the opening, the model, the delivery: diagnostics the runner could forge, never counted once candidate code is
    imported; the null's model stage calibrates the fixed cost)."""
    __slots__ = ("send", "armed", "gate", "done", "synced", "reply", "stale_ns", "early", "event_ms", "stages")

    def __init__(self, send):
        self.send, self.armed, self.gate, self.done, self.reply, self.stale_ns = send, None, None, None, None, 0
        self.synced = None
        self.early, self.event_ms, self.stages = False, None, None


def _readable(sock):
    return bool(select.select([sock], [], [], 0)[0])


class JudgeFailure(RuntimeError):
    """The judge could not seal a gated call's inputs; dead: its process is gone (or its socket broke)."""

    def __init__(self, msg, dead=False):
        super().__init__(msg)
        self.dead = dead


def timed_ask(worker, page, gate_page, cmd, key, arm_ns, timeout, mem_limit=None):
    """One gated call of `worker` (workers.Worker, the runner) with done page `page` and gate page `gate_page`
    (whose call_id counts the calls), its inputs already sealed by the judge with `key` (64-bit): (reply, Times).
    arm_ns: ns after the send at which the gate opens if the runner has not armed. Raises workers.WorkerError as
    Worker.ask does."""
    gate_page.call_id += 1
    cid, words, gate_words = gate_page.call_id, page.words, gate_page.words
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
    times.early = words[DONE] == cid                # before the gate: the runner's stream did not wait
    gate_words[KEY], gate_words[KEY + 1] = key & 0xFFFFFFFF, key >> 32
    times.gate = time.perf_counter_ns()
    gate_words[GATE] = cid                          # (x86 stores are seen in order: KEY before GATE)
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
    while times.done is not None and time.perf_counter_ns() < end_by:     # SYNCED, then the reply, busy-polled
        if times.synced is None and words[SYNCED] == cid:                  # (no wake-up latency)
            times.synced = time.perf_counter_ns()
        if _readable(worker.sock):
            break
        os.sched_yield()
    times.reply = time.perf_counter_ns()
    reply, _ = worker.ask(None, max(0.001, (end_by - times.reply) / 1e9), mem_limit)
    return reply, times


class Calibration:
    """From the null model's gated calls (medians, ns): pre (send to armed), fixed (gate to done less the null's own
    writes, its model stage by CUDA events where there are stages), gap (done to reply), sync_gap (done to synced).
    arm_ns: the arming deadline after the send."""

    def __init__(self, rows):
        rows = [t for t in rows if t.armed is not None and t.done is not None]
        if len(rows) < 3:
            raise RuntimeError(f"the gate's calibration: {len(rows)} null calls armed and done (at least 3 needed)")
        self.pre = statistics.median(t.armed - t.send for t in rows)
        self.fixed = statistics.median(t.done - t.gate - (t.stages[1] * 1e6 if t.stages else 0.0) for t in rows)
        self.gap = statistics.median(t.reply - t.done for t in rows)
        synced = [t.synced - t.done for t in rows if t.synced is not None]
        self.sync_gap = statistics.median(synced) if synced else None
        self.arm_ns = int(self.pre + HOST_ALLOWANCE_US * 1e3)

    def call_ms(self, t):
        """(counted ms, tail ms charged) of one call: gate to DONE less the fixed cost (at least 1 us: the gate
        resolves nothing finer), plus the tail (module docstring: SYNCED's whole delay past GAP_TOL_US, the reply's
        beyond REPLY_TOL_US). Raises
        ValueError for a call without DONE or with DONE before its gate opened (only a tampered runner does either:
        its stream did not wait for the gate, or it suppressed DONE)."""
        if t.done is None:
            raise ValueError("the call's DONE word never came though the runner replied")
        if t.early:
            raise ValueError("the call's DONE word came before its gate opened")
        tail = max(0.0, (t.reply - t.done) - self.gap - REPLY_TOL_US * 1e3)
        late = (t.synced - t.done) - self.sync_gap if t.synced is not None and self.sync_gap is not None else 0.0
        tail = max(tail, late if late > GAP_TOL_US * 1e3 else 0.0)        # all of it: SYNCED is seldom late
        return max(1e-3, (t.done - t.gate - self.fixed) / 1e6) + tail / 1e6, tail / 1e6

    def summary(self, rows):
        """The record's clock fields of gated calls `rows` (Times)."""
        timed = [t for t in rows if t.done is not None and not t.early]
        tails = [self.call_ms(t)[1] for t in timed]
        events = [t.event_ms for t in rows if t.event_ms is not None]
        stages = [t.stages for t in rows if t.stages is not None]
        return dict(kind="gate", event_ms=round(statistics.median(events), 5) if events else None,
                    stages_ms=[round(statistics.median(col), 5) for col in zip(*stages)] if stages else None,
                    fixed_ms=round(self.fixed / 1e6, 5), pre_ms=round(self.pre / 1e6, 5),
                    gap_ms=round(self.gap / 1e6, 5), late_arms=sum(t.armed is None for t in rows),
                    tails=sum(x > 0 for x in tails), tail_ms=round(sum(tails), 5),
                    tails_by=dict(synced=sum(t.synced is not None and self.sync_gap is not None and
                                             t.synced - t.done - self.sync_gap > GAP_TOL_US * 1e3 for t in timed),
                                  reply=sum(t.reply - t.done - self.gap > REPLY_TOL_US * 1e3 for t in timed)),
                    stale=sum(t.stale_ns > STALE_US * 1e3 for t in rows), calls=len(rows))


# ------------------------------------------------------------------------------------------ the parent's side
# (the runner's and the judge's sides, with the driver calls, the input buffer and the null model: gate_device.py)

class SessionGate:
    """The gate of one evaluation (session.Session): its pages (page: DONE, ARMED, SYNCED; gate_page: GATE, KEY,
    sealed at once), its judge (workers.JudgeWorker: the inputs), the calibration, every gated call's Times (rows: the
    reference's then the candidate's, once calibrated). why: the reason the gate could not be armed or calibrated
    (then claims count), or None."""

    def __init__(self, judge):
        self.page, self.gate_page, self.judge = Page(), Page(), judge
        self.gate_page.seal()
        self.calib, self.rows, self.null_rows, self.why, self.session = None, [], [], None, None
        self.strays = []                 # each reference_strays reason, in order (the record's ref_strays)

    def pass_fds(self):
        """The pages a runner is handed at its fork (workers.Worker's pass_fds)."""
        return dict(done_fd=self.page.fd, gate_fd=self.gate_page.fd)

    def close(self):
        """Both pages unmapped and their fds closed (at the evaluation's end: a batch makes two per candidate)."""
        self.page.close()
        self.gate_page.close()

    def arm(self, session):
        """The judge makes the input buffer of the task, then the runner maps it and pins the pages (its `gate`
        command, after the output exchange is open). Returns False, with `why` set, where either cannot: the gate
        page is not sealed, no CUDA IPC, inputs the buffer cannot hold, the driver refuses."""
        self.session = session
        if not self.gate_page.sealed:
            self.why = "the gate page could not be sealed (F_SEAL_FUTURE_WRITE): a runner could open its own gate"
            return False
        try:
            spec, _ = session.judge(dict(op="inputs", path=os.path.join(session.tmp, "inputs.bin")))
        except RuntimeError as e:
            self.why = f"the judge's input buffer: {e}"[:300]
            return False
        r, _ = session.ask(dict(op="gate", inputs=spec["spec"]))
        self.why = None if r["ok"] else r["error"]
        return bool(r["ok"])

    def ask(self, worker, cmd, timeout, mem_limit=None):
        """One gated call: (reply, wall s from the send to the reply). The call's seed goes to the judge alone, with
        a fresh key. Once calibrated, reply["ms"] is the counted ms (Calibration.call_ms) and the runner's own
        figure is kept as reply["event_ms"]. Raises ValueError for a call without DONE or with DONE before its gate,
        JudgeFailure when the judge could not seal the inputs, workers.WorkerError as Worker.ask does."""
        key = secrets.randbits(64)
        try:
            self.session.judge(dict(op="seal", seed=cmd["seed"], key=str(key)))
        except RuntimeError as e:
            raise JudgeFailure(f"the judge could not seal the inputs: {e}") from None
        arm_ns = self.calib.arm_ns if self.calib else int(ARM_FIRST_MS * 1e6)
        reply, t = timed_ask(worker, self.page, self.gate_page, {k: v for k, v in cmd.items() if k != "seed"}, key,
                             arm_ns, timeout, mem_limit)
        self.rows.append(t)
        t.event_ms = reply.get("ms") if isinstance(reply.get("ms"), (int, float)) else None
        stages = reply.get("stages")
        t.stages = stages if isinstance(stages, list) and len(stages) == 3 and \
            all(isinstance(x, (int, float)) for x in stages) else None
        if t.early:
            raise ValueError("the call's DONE word came before its gate opened")
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

    def reference_strays(self, n):
        """Why the reference's last n gated calls cannot be counted, or None. No candidate code has run in the runner
        yet, so here the reference's own CUDA-event times are trusted: a median counted time (gate to DONE less the
        fixed cost) that strays from theirs by more than max(REF_TOL_US, REF_TOL_FRAC of them) means the calibration
        or these calls were disturbed (on an H100 beside 14 builds: a null whose calls read 0.18 ms of fixed cost
        against 0.02 ms, counting a 50 us reference as 1 us; the parent's polls losing the CPU on 26 of 38 calls,
        reading a 2.67 ms reference as 2.95 ms, a 1.10x speedup for a copy of it). None where the calls have no
        events (the CPU host stand-in)."""
        rows = [t for t in self.rows[-n:] if t.done is not None and not t.early] if n else []
        events = [t.event_ms for t in rows if t.event_ms]
        if not rows or len(events) < len(rows):
            return None
        counted, own = statistics.median(self.calib.call_ms(t)[0] for t in rows), statistics.median(events)
        if abs(counted - own) * 1e3 <= max(REF_TOL_US, REF_TOL_FRAC * own * 1e3):
            return None
        stale = sum(t.stale_ns > STALE_US * 1e3 for t in rows)
        why = (f"the reference read {counted:.4g} ms by the gate against {own:.4g} ms by its own events (fixed cost "
               f"{self.calib.fixed / 1e6:.4g} ms; {stale} of {len(rows)} calls stale)")
        self.strays.append(why)
        return why

    def record(self, n_ref):
        """The record's clock fields: the candidate's gated calls (after the reference's first n_ref), and the
        reference's under "ref"."""
        ref = self.calib.summary(self.rows[:n_ref])
        null = self.calib.summary(self.null_rows[NULL_WARMUP:])
        return dict(self.calib.summary(self.rows[n_ref:]), null_stages_ms=null["stages_ms"],
                    ref={k: ref[k] for k in ("late_arms", "tails", "stale", "stages_ms")}, ref_strays=self.strays)
