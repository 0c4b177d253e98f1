"""workers.py: the parent's side of the workers the fork server (forkserver.py) forks. A Worker is one worker as the
caller's process sees it: its socket, its first message (how it is confined), ask() (one size-limited JSON frame each
way with a deadline, the worker's process group held under the host-memory limit meanwhile), its CPU time and its kill
through the fork server. The wall time of each exchange is the parent's clock that session.py checks claimed times
against. Also here: the judge kept per GPU (judge_for) and each GPU's lock (GpuLock), which holds the deaths of the
runners handed to it until the next holder settles them.

Separate from forkserver.py, the fork server process itself (run as a script under `python -P`, in bubblewrap):
nothing here runs inside the fork server, everything here runs in the caller's process.
"""
import contextlib, json, os, select, socket, sys, threading, time

from harness import cores
from harness import kernel_eval
from harness import runner
from harness.forkserver import PREAMBLE, fork_server, scrubbed_env, server_key, work_folder


class WorkerError(Exception):
    """A worker died ("dead"), did not answer in time ("hung"), broke the protocol ("protocol") or used too much
    host memory ("memory")."""
    def __init__(self, kind, msg):
        super().__init__(msg)
        self.kind = kind


_RSS, _RSS_LOCK = dict(t=-1e9, by_group={}), threading.Lock()
RSS_MAX_AGE_S = 0.5      # a group's resident memory is read from a /proc scan at most this old, one scan shared by
                         # every thread: one scan per waiting runner was ~30 a second in a 14-build batch on the H200,
                         # each holding the parent's GIL for ~8 ms beside the thread that times


def _group_rss(pgid):
    """Resident bytes of every process in process group pgid (Linux /proc; 0 elsewhere), from the latest scan of
    /proc (at most RSS_MAX_AGE_S old; a new one when older)."""
    with _RSS_LOCK:
        if time.monotonic() - _RSS["t"] > RSS_MAX_AGE_S:
            by, page = {}, os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
            for d in os.listdir("/proc") if os.path.isdir("/proc") else []:
                if d.isdigit():
                    with contextlib.suppress(OSError, ValueError, IndexError):
                        st = open(f"/proc/{d}/stat").read()
                        fields = st[st.rindex(")") + 2:].split()    # after "pid (comm) ": state ppid pgrp ... rss
                        by[int(fields[2])] = by.get(int(fields[2]), 0) + int(fields[21]) * page
            _RSS.update(t=time.monotonic(), by_group=by)
        return _RSS["by_group"].get(pgid, 0)


class Worker:
    """A forked worker and the socket to it. ask() sends one command and waits for the reply: the wall time it
    returns is the parent's clock; a reply later than `timeout` s, a dead worker, a malformed
    reply or a process group over the host-memory limit raise WorkerError."""

    def __init__(self, role, spec, env, cwd, start_timeout=120.0, build_dir=None, writable_files=(), writable_dirs=(),
                 pass_fds=None):
        self.log, self.t0 = os.path.join(cwd, f"{role}.log"), time.time()
        self.zygote = fork_server(env.get("CUDAL1_BUILD_ROOT"))
        self.sock, self.server_pid = self.zygote.fork(role, spec, env, cwd, self.log, build_dir, writable_files,
                                                      writable_dirs, pass_fds)
        self.pid, self.exit, self.sandbox = self.server_pid, None, "none"
        self.confined = self._preamble(start_timeout)
        hello, _ = self.ask(None, start_timeout)
        self.start_s = max(0.0, hello.get("t", time.time()) - self.t0) if isinstance(hello.get("t"), float) else None

    def _preamble(self, timeout):
        """The worker's first message: its Landlock result; its pid in this process's PID namespace (the server's
        differs under bubblewrap) from the kernel's credentials. Raises WorkerError when it is missing or says the
        runner could not be confined."""
        data, pid = b"", None
        self.sock.settimeout(timeout)
        try:
            while len(data) < PREAMBLE:
                chunk, anc, _, _ = self.sock.recvmsg(PREAMBLE - len(data), socket.CMSG_SPACE(12))
                if not chunk:
                    raise WorkerError("dead", f"the worker ended before it started; log: {self.log_tail()}")
                for level, kind, value in anc:
                    if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS and pid is None:
                        pid = int.from_bytes(value[:4], sys.byteorder)
                data += chunk
        except socket.timeout:
            raise WorkerError("hung", f"no start within {timeout:.0f} s") from None
        finally:
            self.sock.settimeout(None)
        self.pid = pid or self.server_pid
        confined = json.loads(data)
        if confined.get("error"):
            raise WorkerError("dead", f"the runner could not be confined: {confined['error']}")
        self.sandbox = "+".join(n for n in ("landlock", "bwrap") if n in self.zygote.layers and
                                (n == "bwrap" or confined.get("landlock_ms") is not None)) or "none"
        return confined

    def send(self, cmd):
        """A command sent without waiting for its reply (gate.timed_ask polls its gate meanwhile, then ask(None));
        WorkerError("dead") when the worker is gone."""
        try:
            runner.send(self.sock, cmd)
        except (ConnectionError, BrokenPipeError):
            raise WorkerError("dead", "the process ended without a reply") from None

    def check_memory(self, mem_limit):
        """Raises WorkerError("memory") when the worker's process group holds more than mem_limit bytes (None: no
        limit)."""
        rss = _group_rss(self.pid) if mem_limit else 0
        if mem_limit and rss > mem_limit:
            raise WorkerError("memory", f"host memory {rss / 2 ** 30:.1f} GiB over the limit of "
                                        f"{mem_limit / 2 ** 30:.1f} GiB (CUDAL1_MEM_LIMIT_GB)")

    def cpu_s(self):
        """CPU seconds the worker and every process below it have run: the clock for CPU evaluations, which load on
        the machine does not inflate (a busy 2-core box adds ~10 ms to a 35 ms call). Each process's own CPU-time
        clock (ns; its threads, those that have exited too: a helper thread joined before the reply still counts),
        what its reaped children ran (clock ticks), and its live or not yet reaped children the same way."""
        total, todo, seen = 0, [self.pid], set()
        while todo:
            pid = todo.pop()
            if pid in seen:
                continue
            seen.add(pid)
            with contextlib.suppress(OSError, ValueError, IndexError):
                total += time.clock_gettime_ns(((~pid) << 3) | 2)   # the process's CPUCLOCK_SCHED (clock_getcpuclockid)
                fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()   # state ppid ... cutime cstime
                total += (int(fields[13]) + int(fields[14])) * 10 ** 9 // os.sysconf("SC_CLK_TCK")
                for tid in os.listdir(f"/proc/{pid}/task"):
                    todo += [int(c) for c in open(f"/proc/{pid}/task/{tid}/children").read().split()]
        return total / 1e9

    def ask(self, cmd, timeout, mem_limit=None, clock="wall"):
        """The reply to cmd and the seconds it took by `clock`: "wall" (the parent's clock) or "cpu" (the CPU time
        the worker spent, cpu_s)."""
        t0, c0 = time.perf_counter(), self.cpu_s() if clock == "cpu" else 0.0
        try:
            if cmd is not None:
                runner.send(self.sock, cmd)
            deadline = t0 + timeout
            while True:
                left = deadline - time.perf_counter()
                if left <= 0:
                    raise WorkerError("hung", f"no reply within {timeout:.0f} s")
                r, _, _ = select.select([self.sock], [], [], min(left, 0.5))
                if r:
                    break
                self.check_memory(mem_limit)
            self.sock.settimeout(max(1.0, deadline - time.perf_counter()))
            reply = runner.recv(self.sock)
        except socket.timeout:
            raise WorkerError("hung", f"a reply started but did not finish within {timeout:.0f} s") from None
        except (EOFError, ConnectionError, BrokenPipeError):
            raise WorkerError("dead", "the process ended without a reply") from None
        except ValueError as e:
            raise WorkerError("protocol", f"malformed reply: {e}") from None
        finally:
            self.sock.settimeout(None)
        return reply, (self.cpu_s() - c0) if clock == "cpu" else time.perf_counter() - t0

    def kill(self):
        if self.pid is not None:
            with contextlib.suppress(Exception):
                self.exit = self.zygote.kill(self.server_pid)
            self.pid = None
            with contextlib.suppress(Exception):
                self.sock.close()
        return self.exit

    def log_tail(self, n=1500):
        with contextlib.suppress(OSError):
            with open(self.log, "rb") as f:
                f.seek(max(0, os.path.getsize(self.log) - n))
                return f.read().decode(errors="replace").strip()
        return ""


_JUDGES, _JLOCK, _GPU_LOCKS, _JSTART = {}, threading.Lock(), {}, {}


class JudgeWorker:
    """The judge worker of one (device, GPU, build root), shared by every evaluation in this process."""

    def __init__(self, device, gpu, build_root):
        self.tmp = work_folder(build_root)
        split = cores.core_split(device, gpu)
        spec = dict(device=device, cpus=split and split[0], kernel_eval=kernel_eval.for_worker(device, build_root))
        self.worker = Worker("judge", spec, scrubbed_env(self.tmp, build_root, gpu=gpu), self.tmp)
        self.lock = threading.Lock()

    def ask(self, cmd, timeout=900.0):
        with self.lock:
            reply, wall = self.worker.ask(cmd, timeout)
        if not reply.get("ok"):
            raise RuntimeError(reply.get("error") or "judge error")
        return reply, wall


def judge_for(device, gpu, build_root):
    """The judge of (device, GPU, build root), started on first use. Started under a lock of its own key: under
    the module's lock, which gpu_lock() takes too, starting it (with the fork server: ~4 s on the H200 box) held
    back every build of evaluate_many's batch."""
    key = (device, gpu, build_root, server_key(build_root))      # inside the fork server of its runners
    with _JLOCK:
        starting = _JSTART.setdefault(key, threading.Lock())
    with starting:
        judge_worker = _JUDGES.get(key)
        if judge_worker is None or judge_worker.worker.pid is None:
            judge_worker = JudgeWorker(device, gpu, build_root)
            with _JLOCK:
                _JUDGES[key] = judge_worker
        return judge_worker


def release_other_judges(judge_worker, device, gpu):
    """Every other judge of this device and GPU in this process drops its task's buffers (judge.py's `release`), so
    that they do not hold GPU memory beside `judge_worker`'s evaluation; a judge released rebuilds its task when next
    used. Judges differ by build root and fork server (tests use several); a program with one judge per GPU pays
    nothing."""
    with _JLOCK:
        others = [j for k, j in _JUDGES.items() if k[:2] == (device, gpu) and j is not judge_worker]
    for other in others:
        with contextlib.suppress(Exception):             # a dead or stuck judge frees its memory by dying
            other.ask(dict(op="release"), timeout=60.0)


def drop_judge(judge_worker):
    with _JLOCK:
        for k, v in list(_JUDGES.items()):
            if v is judge_worker:
                del _JUDGES[k]
    judge_worker.worker.kill()


class GpuLock:
    """The lock one candidate at a time holds on a GPU (or on the CPU device) for its checks and timing, and the
    deaths its holders left behind. A runner's death (SIGKILL, then the driver tearing down its CUDA context:
    0.10-0.13 s on the H200) need not hold the lock: the next holder's
    first steps (the judge's setup, its own runner's CUDA context) time nothing. So a holder hands its runner to
    kill() and leaves; every holder calls settle() before its first timed call, which waits until every runner
    handed over is gone, its GPU work and context with it. (Until the fork server's SIGKILL lands, milliseconds, the
    candidate may still run beside the next holder's setup, as the next holder's runner already ran beside it:
    evaluate_many keeps per_gpu jobs alive at once.)"""

    def __init__(self):
        self._lock, self._dying = threading.Lock(), []

    def acquire(self, *a, **kw):
        return self._lock.acquire(*a, **kw)

    def release(self):
        self._lock.release()

    def locked(self):
        return self._lock.locked()

    __enter__ = acquire

    def __exit__(self, *exc):
        self.release()

    def kill(self, worker, done=None):
        """worker.kill() in a thread (the holder calls this under the lock); returns the thread. done: called
        after the death, from that thread."""
        def die():
            try:
                worker.kill()
            finally:
                if done is not None:
                    done(worker)
        t = threading.Thread(target=die, name="cudal1-kill", daemon=True)
        t.start()
        self._dying.append(t)
        return t

    def settle(self):
        """Waits (under the lock) until every runner handed to kill() is dead; returns the seconds waited."""
        t0 = time.perf_counter()
        while self._dying:
            self._dying.pop().join()
        return time.perf_counter() - t0


def gpu_lock(device, gpu):
    """The GpuLock of a GPU (or of the CPU device), one per process."""
    with _JLOCK:
        return _GPU_LOCKS.setdefault((device, gpu), GpuLock())
