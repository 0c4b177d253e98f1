"""harness/gate.py: call times by the parent's clock through a gate on the runner's stream.

CPU (here): the page's layout and sharing, the counting rules on synthetic stamps, and the parent's polling against a
fake runner, a forked process that plays the GPU on the same page (arms, waits for the gate, writes DONE after a
delay, replies): the measured interval matches the delay; an early DONE, a late reply, a runner that never arms and
a reply without DONE are each named or charged.
GPU (`-m gpu`, next to an H200): the gate agrees with CUDA events on 10-500 us kernels; a candidate that rewrites
the runner's timing code in place, a side stream and a background thread are charged their real time. Each GPU test
prints what it measured."""
import os
import select
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from harness import gate, options, runner, task_io  # noqa: E402

MS = 1_000_000          # ns


# ------------------------------------------------------------------------------------------------ page, rules

def test_page_layout_is_shared_memfd():
    page = gate.Page()
    try:
        assert os.readlink(f"/proc/self/fd/{page.fd}").startswith("/memfd:"), "the page is not a memfd"
        assert len(page.mm) == gate.PAGE == 4096
        offsets = [4 * w for w in (gate.GATE, gate.DONE, gate.ARMED)]
        assert len({o // 64 for o in offsets}) == 3, f"words {offsets} share a cache line"
        import mmap
        other = mmap.mmap(page.fd, gate.PAGE)             # what the runner maps from the fd it was handed
        page.words[gate.DONE] = 7
        assert int.from_bytes(other[4 * gate.DONE:4 * gate.DONE + 4], sys.byteorder) == 7
        other[4 * gate.ARMED:4 * gate.ARMED + 4] = (9).to_bytes(4, sys.byteorder)
        assert page.words[gate.ARMED] == 9
        other.close()
    finally:
        page.close()
    page.close()                                          # twice is harmless (also run when it is dropped)


def stamps(send=0, armed=1, open_=2, done=5, reply=6, stale=0):
    t = gate.Times(send * MS)
    t.armed = None if armed is None else armed * MS
    t.gate, t.done, t.reply, t.stale_ns = open_ * MS, None if done is None else done * MS, reply * MS, stale
    return t


def test_calibration_counts_gate_to_done_less_the_null():
    null = [stamps(armed=1, open_=1, done=1.2, reply=1.3) for _ in range(5)]
    cal = gate.Calibration(null)
    assert cal.fixed == pytest.approx(0.2 * MS) and cal.gap == pytest.approx(0.1 * MS)
    assert cal.arm_ns == pytest.approx(1 * MS + gate.HOST_ALLOWANCE_US * 1e3)
    ms, tail = cal.call_ms(stamps(open_=2, done=7.2, reply=7.3))
    assert ms == pytest.approx(5.0) and tail == 0.0
    ms, tail = cal.call_ms(stamps(open_=2, done=7.2, reply=7.3 + gate.GAP_TOL_US / 2e3))   # within the tolerance
    assert ms == pytest.approx(5.0) and tail == 0.0
    ms, tail = cal.call_ms(stamps(open_=2, done=2.2, reply=9.3))      # DONE early, the reply 7 ms after it
    assert tail == pytest.approx(7.0) and ms == pytest.approx(7.0 + 1e-3)
    with pytest.raises(ValueError, match="DONE"):
        cal.call_ms(stamps(done=None))
    with pytest.raises(RuntimeError, match="calibration"):
        gate.Calibration([stamps(armed=None)] * 5)
    s = cal.summary([stamps(armed=None, open_=2, done=7.2, reply=7.3), stamps(open_=2, done=2.2, reply=9.3,
                                                                              stale=10 ** 6)])
    assert (s["kind"], s["late_arms"], s["tails"], s["stale"], s["calls"]) == ("gate", 1, 1, 1, 2), s


def test_worker_memory_check_without_a_limit():
    from harness import workers
    worker = workers.Worker.__new__(workers.Worker)
    worker.pid = os.getpgrp()                             # (a worker leads its own process group)
    worker.check_memory(None)                             # no limit: nothing to compare (the judge's asks)
    with pytest.raises(workers.WorkerError, match="over the limit"):
        worker.check_memory(1)


def test_options_clock_is_opt_in(monkeypatch):
    monkeypatch.delenv("CUDAL1_CLOCK", raising=False)
    assert options.make().clock == "claims"
    with pytest.raises(ValueError, match="clock"):
        options.make(clock="events")
    assert gate.requested(options.make(clock="gate"))
    assert not gate.requested(options.make())
    assert not gate.requested(options.make(device="cpu", clock="gate")), "the CPU device has no gate"
    assert not gate.requested(options.make(protocol="kernelbench", clock="gate"))
    assert not gate.requested(options.make(clock="gate", check_only=True))
    monkeypatch.setenv("CUDAL1_CLOCK", "gate")
    assert gate.requested(options.make())


# --------------------------------------------------------------------------------- the parent's polling, faked

def _busy(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        os.sched_yield()                      # the parent polls on a core of its own only on a big box


def _fake_runner(sock, words):
    """The runner and its GPU in one process: per call, cmd["fake"] says what it does (arm, work s before DONE,
    early: DONE as soon as the gate opens, tail s between DONE and the reply, no_done)."""
    while True:
        try:
            cmd = runner.recv(sock)
        except (EOFError, OSError, ValueError):
            os._exit(0)
        f, cid = cmd["fake"], cmd["call_id"]
        if f.get("arm", True):
            words[gate.ARMED] = cid
        while words[gate.GATE] < cid:
            os.sched_yield()
        if f.get("early"):
            words[gate.DONE] = cid
        _busy(f.get("work", 0.0))
        if not f.get("no_done"):
            words[gate.DONE] = cid
        _busy(f.get("tail", 0.0))
        runner.send(sock, dict(ok=True, ms=0.0, checksum=0, order=None, meta=[]))


class FakeWorker:
    """workers.Worker's surface that gate.timed_ask uses, on a socket to _fake_runner."""

    def __init__(self, sock):
        self.sock = sock

    def send(self, cmd):
        runner.send(self.sock, cmd)

    def check_memory(self, mem_limit):
        pass

    def ask(self, cmd, timeout, mem_limit=None):
        assert cmd is None
        r, _, _ = select.select([self.sock], [], [], timeout)
        assert r, "no reply from the fake runner"
        return runner.recv(self.sock), 0.0


@pytest.fixture()
def fake():
    """(SessionGate, FakeWorker) with its fake runner forked on the gate's page; calibrated on 8 null calls."""
    import socket
    sg = gate.SessionGate()
    a, b = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        try:
            a.close()
            _fake_runner(b, sg.page.words)
        finally:
            os._exit(0)
    b.close()
    worker = FakeWorker(a)
    for _ in range(8):
        sg.ask(worker, dict(op="call", fake={}), 10.0)
    sg.calib, sg.rows = gate.Calibration(sg.rows[2:]), []
    yield sg, worker
    a.close()
    os.waitpid(pid, 0)
    sg.page.close()


def median_ms(sg, worker, n=5, **fake_kw):
    out = sorted(sg.ask(worker, dict(op="call", fake=fake_kw), 10.0)[0]["ms"] for _ in range(n))
    return out[n // 2]


def least_ms(sg, worker, n=5, **fake_kw):
    """The least of n calls: on a loaded box the OS can only delay the fake runner or the parent, which lengthens a
    reading, never shortens it, so the least is the one it disturbed least (and an under-read shows in it first)."""
    return min(sg.ask(worker, dict(op="call", fake=fake_kw), 10.0)[0]["ms"] for _ in range(n))


def test_interval_matches_the_delay(fake):
    sg, worker = fake
    for work_ms in (5.0, 20.0):
        ms = least_ms(sg, worker, work=work_ms / 1e3)
        print(f"fake device work {work_ms} ms: gate measured {ms:.3f} ms (fixed {sg.calib.fixed / MS:.4f} ms)")
        assert abs(ms - work_ms) < max(2.0, 0.1 * work_ms), f"{ms} ms measured for {work_ms} ms"
    assert sg.calib.summary(sg.rows)["late_arms"] == 0


def test_early_done_and_late_reply_are_charged(fake):
    sg, worker = fake
    ms = median_ms(sg, worker, early=True, work=0.02)                 # DONE forged at once, the work after it
    print(f"early DONE before 20 ms of work: counted {ms:.3f} ms")
    assert ms > 18.0, f"an early DONE counted {ms} ms for 20 ms of work"
    ms = median_ms(sg, worker, work=0.002, tail=0.02)                  # work left after DONE
    print(f"2 ms, then 20 ms left after DONE: counted {ms:.3f} ms")
    assert ms > 20.0, f"work left after DONE was not charged: {ms} ms"
    assert sg.calib.summary(sg.rows)["tails"] >= 6


def test_a_long_call_is_polled_slowly_and_still_timed(fake, monkeypatch):
    sg, worker = fake
    monkeypatch.setattr(gate, "SLOW_NS", 2 * MS)          # past 2 ms: DONE looked at every 0.5 ms
    ms = median_ms(sg, worker, n=3, work=0.015)
    print(f"15 ms of work polled slowly after 2 ms: {ms:.3f} ms")
    assert abs(ms - 15.0) < 2.5, ms


def test_a_runner_that_never_arms_is_opened_at_the_deadline(fake):
    sg, worker = fake
    ms = least_ms(sg, worker, n=3, arm=False, work=0.005)
    assert all(t.armed is None and t.gate - t.send >= sg.calib.arm_ns for t in sg.rows), \
        "the gate opened before the arming deadline"
    assert abs(ms - 5.0) < 2.0, ms
    assert sg.calib.summary(sg.rows)["late_arms"] == 3


def test_a_reply_without_done_is_named(fake):
    sg, worker = fake
    with pytest.raises(ValueError, match="DONE"):
        sg.ask(worker, dict(op="call", fake=dict(no_done=True, work=0.001)), 10.0)


def test_the_page_reaches_a_forked_runner(tmp_path):
    """The memfd travels with the fork request (forkserver) and the runner maps it (on the CPU device the host
    stand-in stops there; on a GPU the `gate` command also pins it)."""
    from harness import forkserver, workers
    folder = forkserver.work_folder()
    task = os.path.join(folder, "task.py")
    with open(task, "w") as f:
        f.write("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
                "def get_inputs():\n    return [torch.ones(4)]\ndef get_init_inputs():\n    return []\n")
    spec = dict(device="cpu", protocol="strict", task_path=task, candidate_path=task, flags_override=None, nice=0)
    page = gate.Page()
    w = workers.Worker("runner", spec, forkserver.scrubbed_env(folder), folder, gate_fd=page.fd)
    try:
        r, _ = w.ask(dict(op="gate"), 120)
        print("runner's gate reply:", r)
        assert r["ok"], f"the page did not reach the runner: {r}"
    finally:
        w.kill()
        page.close()


TINY = os.path.join(ROOT, "data", "tiny_cpu", "tasks", "swish.py")


@pytest.mark.parametrize("extra_ms", [0.0, 30.0])
def test_an_evaluation_through_the_host_gate(monkeypatch, extra_ms):
    """session.py, runner.py, forkserver.py and workers.py end to end under clock="gate" on the CPU device, the
    runner's host in the stream's place (gate.HOST_ENV): the null model calibrates, both sides' calls are timed by
    the parent, the record says so; a candidate slower by extra_ms per call is counted slower. (Wall time on a busy
    2-core box: the same model read 0.4x against itself here, so only a large difference is asserted.)"""
    import bench
    monkeypatch.setenv(gate.HOST_ENV, "1")
    task = open(TINY).read()
    cand = task + ("\n\nimport time\n\n\nclass ModelNew(Model):\n    def forward(self, *args):\n"
                   f"        time.sleep({extra_ms / 1e3})\n        return super().forward(*args)\n")
    r = bench.evaluate(task, cand, device="cpu", clock="gate", time_budget_s=0.3, num_correct_trials=1,
                       static_checks=False)
    c = r["clock"] or {}
    print(f"extra {extra_ms} ms: {r['status']} speedup {r['speedup']} ref_ms {r['ref_ms']} cand_ms {r['cand_ms']} "
          f"clock {c} error {r['error']}")
    assert r["status"] == "ok" and c.get("kind") == "gate" and c["calls"] > 0 and c["fixed_ms"] > 0, \
        (r["status"], r["error"], c)
    if extra_ms:
        assert r["cand_ms"] > r["ref_ms"] + 0.6 * extra_ms, "the candidate's extra time was not counted"


# ------------------------------------------------------------------------------------------------ on a GPU

class _LocalExchange:
    """Exchange's surface that RunnerGate.call uses, into a tensor of this process (no CUDA IPC needed)."""

    def __init__(self, like):
        self.buf, self.orders = like.clone(), [None]

    def copy(self, tensors, stream=None):
        self.buf.copy_(tensors[0])   # on the current stream: the gated one (RunnerGate.call)
        return [self.buf]


@pytest.mark.gpu
def test_gate_smoke_in_one_process():
    """The driver side alone, before any evaluation: the memfd page pinned, a wait and a write queued on torch's
    current stream, the gate opened from this thread while another runs RunnerGate.call. Prints each stamp."""
    import threading
    import torch
    page = gate.Page()
    dev = torch.device("cuda")
    x = torch.rand(1024, device=dev)
    rg = gate.RunnerGate(page.fd, dev, type("Ex", (), {"ptr": 1})())
    print("pinned: device address", hex(rg.dptr), "stream", torch.cuda.current_stream().cuda_stream)
    rate = _cycles_per_us()
    ex = _LocalExchange(x)
    for us in (0, 200):
        model = (lambda t: t * 2.0) if us == 0 else (lambda t: (torch.cuda._sleep(int(us * rate)), t * 2.0)[1])
        for call_id in range(10 * (us + 1), 10 * (us + 1) + 5):
            done = {}
            worker = threading.Thread(target=lambda: done.update(r=rg.call(model, [x], call_id, ex, task_io.leaves)))
            t_send = time.perf_counter_ns()
            worker.start()
            while page.words[gate.ARMED] != call_id and time.perf_counter_ns() - t_send < 2e9:
                pass
            t0 = time.perf_counter_ns()
            page.words[gate.GATE] = call_id
            while page.words[gate.DONE] != call_id and time.perf_counter_ns() - t0 < 2e9:
                pass
            t1 = time.perf_counter_ns()
            worker.join(10)
            ms, cs, _, out = done["r"]
            print(f"kernel {us} us, call {call_id}: armed after {(t0 - t_send) / 1e3:.1f} us, gate to DONE "
                  f"{(t1 - t0) / 1e3:.1f} us, events {ms * 1e3:.1f} us, checksum {cs}")
            assert page.words[gate.DONE] == call_id and torch.equal(out, x * 2.0)
    page.close()


SLEEP_TASK = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        torch.cuda._sleep({ref_cycles})
        return x * 2.0


def get_inputs():
    return [torch.rand(1024)]


def get_init_inputs():
    return []
'''
SLEEP_CAND = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        torch.cuda._sleep({cycles})
        return x * 2.0
'''
GPU_KW = dict(device="cuda", num_correct_trials=2, time_budget_s=1.0, timeout_s=600, static_checks=False)


def _cycles_per_us():
    import torch
    torch.cuda._sleep(1000)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(10_000_000)
    end.record()
    end.synchronize()
    return 10_000_000 / (start.elapsed_time(end) * 1e3)


@pytest.mark.gpu
def test_gate_agrees_with_events_on_20_to_500_us():
    import bench
    rate = _cycles_per_us()
    rows = []
    for us in (20, 50, 200, 500):
        r = bench.evaluate(SLEEP_TASK.format(ref_cycles=int(2 * us * rate)), SLEEP_CAND.format(cycles=int(us * rate)),
                           clock="gate", **GPU_KW)
        c = r["clock"] or {}
        rows.append((us, r["status"], r["cand_ms"], c.get("event_ms"), r["speedup"], c))
        print(f"kernel ~{us} us: status {r['status']} gate cand_ms {r['cand_ms']} events {c.get('event_ms')} "
              f"speedup {r['speedup']} (true ~2) clock {c} error {(r['error'] or '')[:300]}")
    for us, status, gate_ms, event_ms, speedup, c in rows:
        assert status == "ok" and c.get("kind") == "gate", (us, status, c)
        assert abs(gate_ms - event_ms) * 1e3 < 2.0 + 0.05 * us, f"{us} us: gate {gate_ms} ms vs events {event_ms}"


SWAP_CAND = '''import sys
import types
import torch
import torch.nn as nn


def _shaved(self, model, inputs):
    ms, out = _real_clock_call(self, model, inputs)     # resolved in the runner's globals once swapped in
    return ms / 10.0, out


def _swap():
    mod = sys.modules["harness.runner"]
    f = mod.Clock.call
    mod._real_clock_call = types.FunctionType(f.__code__, f.__globals__, "call", f.__defaults__, f.__closure__)
    f.__code__ = _shaved.__code__      # the same function object, its code swapped: the first filter sees nothing


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        _swap()

    def forward(self, x):
        torch.cuda._sleep({cycles})
        return x * 2.0
'''


@pytest.mark.gpu
def test_timing_code_rewritten_in_place_is_charged_its_real_time():
    import bench
    rate = _cycles_per_us()
    cycles = int(300 * rate)
    task = SLEEP_TASK.format(ref_cycles=cycles)
    res = {clock: bench.evaluate(task, SWAP_CAND.format(cycles=cycles), clock=clock, **GPU_KW)
           for clock in ("claims", "gate")}
    for clock, r in res.items():
        print(f"clock={clock}: status {r['status']} hack {r['hack']} speedup {r['speedup']} ref_ms {r['ref_ms']} "
              f"cand_ms {r['cand_ms']} clock {r['clock']} error {(r['error'] or '')[:300]}")
    g = res["gate"]
    assert g["clock"] and g["clock"].get("kind") == "gate", g["clock"]
    assert g["speedup"] is None or g["speedup"] < 1.1, f"the swap earned {g['speedup']}x under the gate"


SIDE_CAND = '''import threading
import torch
import torch.nn as nn

_side = torch.cuda.Stream()


class ModelNew(nn.Module):
    def forward(self, x):
        {body}
        return x * 2.0
'''
SIDE_BODY = "with torch.cuda.stream(_side):\n            torch.cuda._sleep({cycles})"
THREAD_BODY = ("threading.Thread(target=lambda: (torch.cuda.set_stream(_side), torch.cuda._sleep({cycles}))).start()"
               "\n        threading.Event().wait(0.0002)")


@pytest.mark.gpu
@pytest.mark.parametrize("body", [SIDE_BODY, THREAD_BODY], ids=["side_stream", "background_thread"])
def test_work_finishing_after_done_is_charged(body):
    import bench
    rate = _cycles_per_us()
    cycles = int(300 * rate)
    r = bench.evaluate(SLEEP_TASK.format(ref_cycles=cycles), SIDE_CAND.format(body=body.format(cycles=cycles)),
                       clock="gate", **GPU_KW)
    print(f"status {r['status']} hack {r['hack']} speedup {r['speedup']} ref_ms {r['ref_ms']} cand_ms {r['cand_ms']} "
          f"clock {r['clock']} error {(r['error'] or '')[:300]}")
    assert r["clock"] and r["clock"].get("kind") == "gate", r["clock"]
    assert r["speedup"] is None or r["speedup"] < 1.1, f"work after DONE earned {r['speedup']}x"
