"""forkserver.py: the processes of bench.py. A fork server that imported torch once forks every worker: one judge per
GPU (judge.py, trusted, kept for the whole run) and one runner per candidate (runner.py, untrusted, killed after
use). A worker starts in ~0.01-0.05 s instead of the 3-5 s of a fresh interpreter importing torch.

Each worker gets its own session (process group), a private working folder, HOME and TMPDIR, a scrubbed
environment (_KEEP_ENV: nothing a candidate needs to steal), stdout/stderr into a log file, and dies with the fork
server (PR_SET_PDEATHSIG). The fork server is the subreaper of its workers (PR_SET_CHILD_SUBREAPER): a candidate's
double forks and setsid daemons come back to it and are killed with the candidate, so nothing of a candidate
outlives its evaluation (workers.GpuLock.settle waits for that before the next timed call on its GPU). The server
never runs candidate code; it ends when its caller closes the socket.

This file is the fork server process (it runs as a script under `python -P`) and how the caller starts it
(fork_server) and makes folders for its workers (work_folder, scrubbed_env). The caller's handles on the workers it
forks (Worker, the judge per GPU, each GPU's lock) are in workers.py, which imports this file.
"""
import contextlib, ctypes, json, os, shutil, signal, socket, subprocess, sys, tempfile, threading, time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:          # the fork server runs with `python -P`: site-packages first, the repository last,
    sys.path.append(ROOT)         # so a torch.py planted there cannot shadow torch
from harness import cores  # noqa: E402
from harness import judge  # noqa: E402
from harness import runner  # noqa: E402
from harness import sandbox  # noqa: E402

_KEEP_ENV = {"PATH", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "PYTHONPATH",
             "TORCH_CUDA_ARCH_LIST", "OMP_NUM_THREADS", "CXX", "CC", "MAX_JOBS", "PYTHONUSERBASE", "LANG", "LC_ALL"}
_KEEP_PREFIXES = ("NCCL_", "TORCH_", "PYTORCH_", "CUDAL1_", "NVCC_", "TRITON_", "TORCHINDUCTOR_")


def scrubbed_env(tmp, build_root=None, arch=None, gpu=None, extra=None):
    """The environment of a worker: the caller's, less anything not needed to build and run (no tokens, no
    credentials), with a private HOME/TMPDIR; extra_env only from trusted callers (evaluate's baselines)."""
    import site
    env = {k: v for k, v in os.environ.items() if k in _KEEP_ENV or k.startswith(_KEEP_PREFIXES)}
    env.setdefault("PYTHONUSERBASE", site.getuserbase())   # user site-packages survive the new HOME
    env.update(HOME=tmp, TMPDIR=tmp, PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1")
    if build_root:
        env["CUDAL1_BUILD_ROOT"] = build_root
    if arch:
        env["TORCH_CUDA_ARCH_LIST"] = arch
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(gpu)
    env.update({str(k): str(v) for k, v in (extra or {}).items()})
    return env


def _prctl(option, arg):
    with contextlib.suppress(Exception):
        import ctypes
        ctypes.CDLL(None).prctl(option, arg, 0, 0, 0)


def _tree():
    """{pid: ppid} of the live (non-zombie) processes (Linux /proc)."""
    out = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                st = open(f"/proc/{d}/stat").read()
                fields = st[st.rindex(")") + 2:].split()
                if fields[0] != "Z":
                    out[int(d)] = int(fields[1])
    return out


def _below(pid):
    """pid and all its descendants, deepest first (so a watcher never sees its parent die before it does)."""
    kids = {}
    for p, pp in _tree().items():
        kids.setdefault(pp, []).append(p)
    order, todo = [], [pid]
    while todo:
        p = todo.pop(0)
        order.append(p)
        todo += kids.get(p, [])
    return order[::-1]


def _strays(me, workers):
    """Processes under the fork server that no live worker accounts for: what a killed candidate left (orphans
    come back to us, the subreaper) with all of their own descendants, so a chain of sessions dies in one pass."""
    tree = _tree()
    kids = {}
    for pid, ppid in tree.items():
        kids.setdefault(ppid, []).append(pid)

    def below(roots):
        seen, todo = set(), list(roots)
        while todo:
            p = todo.pop()
            if p not in seen:
                seen.add(p)
                todo += kids.get(p, [])
        return seen
    spared = below([w for w in workers if w in tree])
    return [p for p in below(kids.get(me, [])) if p not in spared]


def _zygote_main(fd):
    """The fork server (`python -P forkserver.py --_zygote FD`): torch, judge.py and runner.py imported once, no CUDA;
    forks workers on request and is their subreaper, so a candidate's orphans (double forks, setsid daemons) come
    back here and die with the candidate. Never runs candidate code. Exits when the caller closes its socket."""
    import warnings
    warnings.filterwarnings("ignore", category=DeprecationWarning)       # fork() beside torch's native threads
    ctrl, me, workers, exits = socket.socket(fileno=fd), os.getpid(), set(), {}
    with contextlib.suppress(ImportError):   # what torch.utils.cpp_extension needs, so a runner imports it in ms;
        import setuptools  # noqa: F401     # cpp_extension itself must not be imported here (runner.main)
    _prctl(36, 1)                                                       # PR_SET_CHILD_SUBREAPER
    # glibc malloc: tensors below 1 GiB from the heap, kept after free (inherited by every fork). A fresh runner
    # would otherwise mmap and page-fault every input anew while the long-lived judge reuses its heap: on the CPU
    # device, where the clock check reads CPU time, that was up to ~2 ms per call charged to the candidate alone.
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None)
        libc.mallopt(-3, 1 << 30)                                       # M_MMAP_THRESHOLD
        libc.mallopt(-1, 1 << 30)                                       # M_TRIM_THRESHOLD

    def reap():
        while True:
            try:
                pid, st = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid in workers:
                exits[pid] = f"signal {os.WTERMSIG(st)}" if os.WIFSIGNALED(st) else f"exit {os.WEXITSTATUS(st)}"
                workers.discard(pid)

    probe = os.fork()                     # can a forked child still use CUDA? (torch refuses after some calls)
    if probe == 0:
        import torch
        os._exit(3 if torch.cuda._is_in_bad_fork() else 0)
    _, st = os.waitpid(probe, 0)
    ok = os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0
    ctrl.send(json.dumps(dict(ok=ok, pid=me)).encode())
    while True:
        reap()
        try:
            data, fds, _, _ = socket.recv_fds(ctrl, 1 << 20, 4)
        except OSError:
            break
        if not data:
            break
        req = json.loads(data)
        if req["op"] == "fork":
            for name, fd in zip(req.get("fd_names", []), fds[1:]):   # the gate's pages (gate.Page), by these
                req["spec"][name] = fd                                # numbers after the fork
            pid = os.fork()
            if pid == 0:
                _worker_child(ctrl, req, fds[0], me)
            for f in fds:
                os.close(f)
            workers.add(pid)
            ctrl.send(json.dumps(dict(pid=pid)).encode())
        elif req["op"] == "kill":
            pid = req["pid"]
            for p in _below(pid):                                 # the whole tree at once, leaves first
                with contextlib.suppress(OSError):
                    os.kill(p, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
            deadline = time.time() + 10
            while pid in workers and time.time() < deadline:      # gone, and its GPU context with it
                reap()
                time.sleep(0.002)
            deadline = time.time() + 5
            while time.time() < deadline:                         # what it left: orphans re-parented to us
                strays = _strays(me, workers)
                if not strays:
                    break
                for p in strays:
                    with contextlib.suppress(OSError):
                        os.kill(p, signal.SIGKILL)
                time.sleep(0.005)
                reap()
            ctrl.send(json.dumps(dict(ok=True, exit=exits.pop(pid, None))).encode())
    for pid in list(workers):
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)
    os._exit(0)


PREAMBLE = 256     # bytes of a worker's first message: how it is confined, padded JSON (Worker reads it first)


def _worker_child(ctrl, req, fd, server):
    """In a forked worker: its own session, private cwd/HOME/TMPDIR and environment, stdout/stderr to its log; a
    runner then confines itself (sandbox.apply_landlock: writes only in its folder and its candidate's build
    entries) before anything of the candidate is read; the preamble to the parent (its pid as the parent sees it,
    through SO_PASSCRED, and the Landlock result), then judge.main or runner.main on the socket. Never returns."""
    import faulthandler, traceback
    try:
        ctrl.close()
        os.setsid()
        _prctl(1, signal.SIGKILL)                                       # PR_SET_PDEATHSIG: die with the server
        if os.getppid() != server:                                      # the server died before the prctl
            os._exit(0)
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        tempfile.tempdir = None
        log = os.open(req["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        faulthandler.enable()
        sock = socket.socket(fileno=fd)
        confined = dict(landlock_ms=None)
        if req["role"] != "judge" and "landlock" in req.get("layers", ""):
            try:                                                        # (one thread here: right after the fork)
                confined["landlock_ms"] = round(sandbox.apply_landlock(
                    [req["cwd"], req["env"].get("HOME"), req["env"].get("TMPDIR"), req.get("build_dir")]
                    + list(req.get("writable_dirs") or ()),
                    req.get("writable_files") or ()), 3)
            except Exception as e:                                      # never run a candidate unconfined silently
                confined["error"] = f"Landlock: {type(e).__name__}: {e}"[:180]
        sock.sendall(json.dumps(confined).encode().ljust(PREAMBLE))
        if "error" in confined:
            os._exit(0)
        if req["role"] == "judge":
            judge.main(sock, req["spec"])
        else:
            from harness import buildcache   # here, after the fork: importing cpp_extension touches CUDA
            buildcache.ENTRIES[:] = [req["build_dir"]] if req.get("build_dir") else []
            runner.main(sock, req["spec"], buildcache)
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(0)


class _Zygote:
    """The fork server process for one sandbox configuration (`layers`: sandbox.layers()) and build root; under
    bubblewrap when layers has it, with its work folder (self.tmp: every worker's folder, forkserver.work_folder),
    the build root and `extra_binds` (bind_writable's) bound writable."""

    def __init__(self, layers, build_root, extra_binds=()):
        self.layers, self.build_root = layers, build_root
        self.tmp = tempfile.mkdtemp(prefix="cudal1_forkserver_")
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = scrubbed_env(self.tmp)
        argv = [sys.executable, "-P", os.path.join(HERE, "forkserver.py"), "--_zygote", str(b.fileno())]
        if "bwrap" in layers:
            argv = sandbox.bwrap_command(argv, [self.tmp, build_root, *extra_binds])
        with open(os.path.join(self.tmp, "log"), "ab") as log:
            self.proc = subprocess.Popen(argv, pass_fds=[b.fileno()], cwd=self.tmp, env=env,
                                         stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        b.close()
        self.ctrl, self.lock = a, threading.Lock()
        self.ctrl.settimeout(300)
        try:
            ready = json.loads(self.ctrl.recv(4096) or b"null")
        except BaseException as e:                      # Ctrl-C while it imports torch too: no server left behind
            self.proc.kill()
            self.close()
            if not isinstance(e, Exception):
                raise
            raise RuntimeError(f"bench's fork server did not start: {e}; log: {self._log()}") from None
        if not (ready or {}).get("ok"):
            self.close()
            raise RuntimeError("bench's fork server is unusable: torch refuses CUDA in its forked children (something "
                               f"it imported initialised CUDA) or it did not start; log: {self._log()}")
        split = cores.core_split("cuda")               # its forks (and its threads) off the timing cores, whichever
        if split:                                       # thread of ours started it (cores.core_split); under bwrap
            for pid in _below(self.proc.pid):           # the server is bwrap's grandchild: all of them
                with contextlib.suppress(OSError, ValueError):
                    os.sched_setaffinity(pid, split[1])

    def _log(self):
        with contextlib.suppress(OSError):
            return open(os.path.join(self.tmp, "log")).read()[-2000:]
        return ""

    def alive(self):
        return self.proc.poll() is None

    def fork(self, role, spec, env, cwd, log, build_dir=None, writable_files=(), writable_dirs=(), pass_fds=None):
        """A worker forked; returns (the parent's socket to it, the pid the server knows it by). pass_fds: {spec key:
        fd} passed to the worker with its socket (gate.Page memfds), found in its spec under those keys."""
        pass_fds = pass_fds or {}
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        a.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)    # the worker's pid as this process sees it
        try:
            with self.lock:
                socket.send_fds(self.ctrl, [json.dumps(dict(
                    op="fork", role=role, spec=spec, env=env, cwd=cwd, log=log, layers=self.layers,
                    build_dir=build_dir, writable_files=list(writable_files),
                    writable_dirs=list(writable_dirs), fd_names=list(pass_fds))).encode()],
                    [b.fileno()] + list(pass_fds.values()))
                pid = json.loads(self.ctrl.recv(4096))["pid"]
        finally:
            b.close()
        return a, pid

    def kill(self, pid):
        with self.lock:
            self.ctrl.send(json.dumps(dict(op="kill", pid=pid)).encode())
            return json.loads(self.ctrl.recv(4096)).get("exit")

    def close(self):
        with contextlib.suppress(Exception):
            self.ctrl.close()
        with contextlib.suppress(Exception):
            self.proc.wait(timeout=10)
        shutil.rmtree(self.tmp, ignore_errors=True)


_ZYGOTE, _ZLOCK = {}, threading.Lock()
_BINDS = set()       # folders fork servers started from now on bind writable under bubblewrap (bind_writable)


def bind_writable(folders):
    """Folders (created if missing) that every fork server started from now on binds writable under bubblewrap,
    whose read-only root and private /tmp would hide them: a trusted caller's compile caches (evaluate.py's
    baselines, Options.extra_env). A runner writes in them only where Landlock allows it too, which is for the
    caches of its own Options.extra_env. Servers already running keep their binds; the next fork_server() call
    starts one with the new set (and workers.judge_for a judge inside it)."""
    for folder in folders:
        os.makedirs(folder, exist_ok=True)
        _BINDS.add(os.path.abspath(folder))


def server_key(build_root=None):
    """What tells fork servers apart: (sandbox layers, and under bubblewrap the build root and bind_writable's
    folders, which are bound into it)."""
    layers = sandbox.layers()
    if "bwrap" not in layers:
        return layers, None, ()
    return layers, runner.default_build_root() if build_root is None else os.path.abspath(build_root), \
        tuple(sorted(_BINDS))


def start():
    """bench's fork server, started now if it is not running (else on first use: ~4 s on the H200 box, where each
    of a batch's first builds waited for it); returns the seconds this took."""
    t = time.perf_counter()
    fork_server()
    return time.perf_counter() - t


def fork_server(build_root=None):
    """The fork server of this sandbox configuration (sandbox.layers()) and, under bubblewrap, of this build root
    (bound into it); started if not running. Its fork() and kill() are what workers.Worker uses."""
    key = server_key(build_root)
    with _ZLOCK:
        if key not in _ZYGOTE or not _ZYGOTE[key].alive():
            _ZYGOTE[key] = _Zygote(key[0], key[1] or runner.default_build_root(), key[2])
        return _ZYGOTE[key]


def work_folder(build_root=None):
    """A new private folder for one worker (its cwd, HOME and TMPDIR), inside its fork server's work folder: under
    bubblewrap the only place outside the build root that both this process and the workers see."""
    return tempfile.mkdtemp(prefix="cudal1_", dir=fork_server(build_root).tmp)


def _shutdown():
    for z in _ZYGOTE.values():
        z.close()


import atexit  # noqa: E402
atexit.register(_shutdown)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--_zygote":
        _zygote_main(int(sys.argv[2]))
