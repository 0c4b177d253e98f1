"""sandbox.py: what a runner (a candidate's process) may touch, enforced by the kernel, in two layers.

- Landlock, applied by each forked runner to itself before any candidate code runs (forkserver._worker_child; the
  judges are never confined by it): reads and executes anywhere; writes only in its own folders (its cwd, HOME and
  TMPDIR, its candidate's build entries: buildcache.py), /dev (CUDA's device nodes, ioctl included) and /proc; no
  TCP bind or connect (ABI >= 4); no signal to, and no abstract unix socket of, a process outside its own domain
  (ABI >= 6); no ptrace of one either (every ABI). Irreversible and inherited by every process it starts (nvcc, a
  daemon it forks). Through landlockpy (0BSD, no dependencies), which has the network and scope rules.
- bubblewrap around the fork server, hence around judges and runners alike: a read-only root, a private /tmp and
  /dev (the GPU's nodes bound in), new PID, network and IPC namespaces, no capabilities; the work folders of the
  fork server (forkserver.work_folder) and the build root are bound writable. Found on PATH or at $CUDAL1_BWRAP.

CUDAL1_SANDBOX: auto (default: every layer this machine has), landlock (Landlock alone), off (none: for tests that
show an attack succeeding without the sandbox). The record's `sandbox` says which layers ran: landlock+bwrap,
landlock, bwrap or none.
"""
import glob, os, shutil, time

try:                  # imported and its libc found (find_library: a subprocess, ~10 ms) here, in the fork server,
    import landlockpy  # so that a forked runner confines itself in about a millisecond
    landlockpy.abi_version()
except (ImportError, OSError):   # no Landlock layer (the record says so)
    landlockpy = None

MODES = ("auto", "landlock", "off")


def mode():
    """CUDAL1_SANDBOX's value (auto when unset); raises ValueError for another value."""
    value = (os.environ.get("CUDAL1_SANDBOX") or "auto").strip().lower()
    if value not in MODES:
        raise ValueError(f"CUDAL1_SANDBOX={value!r}: expected one of {', '.join(MODES)}")
    return value


def landlock_abi():
    """The kernel's Landlock ABI version, 0 when it has none or landlockpy is not installed."""
    try:
        return int(landlockpy.abi_version()) if landlockpy is not None and landlockpy.supported() else 0
    except OSError:
        return 0


def bwrap_path():
    """The bubblewrap binary ($CUDAL1_BWRAP, else bwrap on PATH), or None."""
    given = os.environ.get("CUDAL1_BWRAP")
    if given:
        return given if os.access(given, os.X_OK) else None
    return shutil.which("bwrap")


def layers():
    """The layers the next fork server and its runners get: "landlock+bwrap", "landlock", "bwrap" or "none"."""
    m = mode()
    have = [name for name, ok in (("landlock", m != "off" and landlock_abi() >= 1),
                                  ("bwrap", m == "auto" and bwrap_path() is not None)) if ok]
    return "+".join(have) or "none"


def apply_landlock(writable, writable_files=()):
    """Confines this process (and every process it starts later) to writing in `writable` folders (and in the files
    `writable_files`), /dev and /proc, without TCP, and without signalling or reaching (abstract unix sockets,
    ptrace) a process outside it. Must run while the process has one thread (ABI < 8 confines the calling thread
    only): right after the fork. Returns the milliseconds it took; raises OSError (landlockpy.LandlockError) or
    AttributeError (landlockpy missing) when it cannot be applied."""
    t0 = time.perf_counter()
    AccessFS, AccessNet, Scope = landlockpy.AccessFS, landlockpy.AccessNet, landlockpy.Scope
    abi = landlock_abi()
    every = landlockpy.fs_for_abi(abi)
    read = (AccessFS.READ_FILE | AccessFS.READ_DIR | AccessFS.EXECUTE) & every
    on_files = (AccessFS.READ_FILE | AccessFS.WRITE_FILE | AccessFS.EXECUTE | AccessFS.TRUNCATE |
                AccessFS.IOCTL_DEV) & every
    with landlockpy.Ruleset(handled_fs=every, handled_net=AccessNet.BIND_TCP | AccessNet.CONNECT_TCP,
                 scoped=Scope.ABSTRACT_UNIX_SOCKET | Scope.SIGNAL) as ruleset:
        ruleset.allow_path("/", read)
        for folder in ["/dev", "/proc"] + [f for f in writable if f]:
            if os.path.isdir(folder):
                ruleset.allow_path(folder, every)
        for path in writable_files:
            if os.path.isfile(path):
                ruleset.allow_path(path, on_files)
        ruleset.restrict()
    return (time.perf_counter() - t0) * 1e3


def bwrap_command(argv, writable):
    """argv run under bubblewrap: read-only root, private /tmp and /dev with the GPU's nodes (/dev/nvidia*) bound
    in, a fresh /proc, new PID, network and IPC namespaces, no capabilities; the folders `writable` (created here
    if missing) bound writable at their own paths. Raises FileNotFoundError without bwrap."""
    exe = bwrap_path()
    if exe is None:
        raise FileNotFoundError("bubblewrap (bwrap) not found: install it or set CUDAL1_BWRAP")
    cmd = [exe, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    for node in sorted(glob.glob("/dev/nvidia*")):
        cmd += ["--dev-bind", node, node]
    for folder in writable:
        os.makedirs(folder, exist_ok=True)
        cmd += ["--bind", folder, folder]
    # (no --die-with-parent: it ties bwrap's life to the thread that started it, one of a batch's pool threads; the
    # fork server ends when its caller's socket closes, and bwrap with it)
    return cmd + ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--cap-drop", "ALL", "--"] + list(argv)
