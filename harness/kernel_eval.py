"""kernel_eval.py: the evaluator's device code (kernel_eval.cu at the top of the repository) built, loaded and
called, and a torch version of each of its functions (the CPU device uses those; the tests hold both equal).

  l2_flush(buf)              persisting L2 lines reset, then every 32-bit word of `buf` written with its index
  spin(cycles, dev)          a one-thread kernel that spins `cycles` SM clock cycles (the clock hides launch latency
                             behind it; no CPU counterpart: CPU calls are timed by thread CPU time)
  poison_fill(t)             every byte of a tensor's storage to 0xFF (NaN in every float type)
  checksum(tensors)          sum of the bytes + 3x the sum of the int32 words of each tensor's raw bytes (an int)
  compare(out, ref, ...)     one pass: max abs/rel error, isclose mismatches, NaNs and, with the float64 reference,
                             the mismatches against it and the float64 sums of the precision error

Build and trust (REFERENCE.md §4: the judge never loads code a candidate could have written): prepare() builds
kernel_eval.cu with nvcc into a folder of the evaluator's own, ROOT/<key>/kernel_eval.so, key = sha256 of the source,
the nvcc version, the GPU arch, the torch version and the flags; never under the candidates' build root (refused).
The build writes a temporary name and renames it, under a file lock, so concurrent builders never see half a file.
The trusted parent calls prepare() before it forks any worker, keeps the library's sha256 in memory and hands
{path, sha256} to each judge and runner in its spec; load() reads the file, checks that hash and loads those very
bytes (from an anonymous memory file), so a library replaced on disk after the parent hashed it is refused, and a
file that no longer matches the hash recorded beside it is rebuilt by the next prepare().
"""
import contextlib, ctypes, hashlib, os, shutil, subprocess, tempfile, threading, time

import numpy
import torch

ROOT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE = os.path.join(ROOT_DIR, "kernel_eval.cu")
NVCC_FLAGS = ["-O3", "-shared", "-Xcompiler", "-fPIC", "--fmad=false"]   # no fused multiply-add: torch's order
TILE = 1024            # elements per tile of the float64 sums (kTile in kernel_eval.cu)
CHUNK = 1 << 26        # elements per step of the torch versions (a multiple of TILE: tiles never straddle steps)
ABI_VERSION = 1        # cudal1_abi_version() of the library this module expects
_DTYPE_CODES = {torch.float32: 0, torch.float64: 1, torch.float16: 2, torch.bfloat16: 3, torch.int64: 4,
                torch.int32: 5, torch.int16: 6, torch.int8: 7, torch.uint8: 8, torch.bool: 9}


# ------------------------------------------------------------------------------------------------ building

def default_root():
    """The evaluator's own build folder: CUDAL1_KERNEL_EVAL_ROOT or ~/.cache/cudal1/kernel_eval."""
    return os.path.abspath(os.path.expanduser(os.environ.get("CUDAL1_KERNEL_EVAL_ROOT")
                                              or "~/.cache/cudal1/kernel_eval"))


def candidates_build_root():
    """Where candidates' extensions are built (runner.default_build_root's rule: CUDAL1_BUILD_ROOT or
    ~/.cache/cudal1/build)."""
    return os.path.abspath(os.path.expanduser(os.environ.get("CUDAL1_BUILD_ROOT") or "~/.cache/cudal1/build"))


def _inside(path, folder):
    path, folder = os.path.realpath(path), os.path.realpath(folder)
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def find_nvcc():
    """The nvcc that builds kernel_eval.cu: $CUDA_HOME/bin, $CUDA_PATH/bin, PATH, /usr/local/cuda/bin; raises
    FileNotFoundError when there is none."""
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")):
        if home and os.path.isfile(os.path.join(home, "bin", "nvcc")):
            return os.path.join(home, "bin", "nvcc")
    found = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.isfile("/usr/local/cuda/bin/nvcc")
                                     else None)
    if not found:
        raise FileNotFoundError("kernel_eval.cu needs nvcc (the CUDA toolkit) to build: none in CUDA_HOME, CUDA_PATH "
                                "or PATH")
    return found


def _sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def build_key(source_bytes, nvcc_version, arch):
    """The folder name of one build: sha256 of the source, the nvcc version text, the arch (e.g. sm_90), the torch
    version and the flags (hex)."""
    h = hashlib.sha256()
    for part in (source_bytes, nvcc_version.encode(), arch.encode(), torch.__version__.encode(),
                 " ".join(NVCC_FLAGS).encode()):
        h.update(hashlib.sha256(part).digest())
    return h.hexdigest()


def device_arch(dev=None):
    """sm_XY of a CUDA device (torch.cuda.get_device_capability)."""
    major, minor = torch.cuda.get_device_capability(dev)
    return f"sm_{major}{minor}"


_PREPARED, _PREPARE_LOCK = {}, threading.Lock()


def prepare(arch=None, root=None, build_root=None, nvcc=None):
    """kernel_eval.cu built for `arch` (default: the current GPU's) into root/<key>/kernel_eval.so, or found there
    already, its content matching the sha256 recorded beside it. Returns {path, sha256, arch, build_s} (build_s 0.0
    when nothing was built). In one process, a later call checks the file against the hash it returned first and
    rebuilds on a difference. Raises ValueError when root is inside the candidates' build root (build_root, default
    candidates_build_root()), FileNotFoundError without nvcc, RuntimeError when nvcc fails."""
    root = os.path.abspath(root or default_root())
    build_root = build_root or candidates_build_root()
    if _inside(root, build_root):
        raise ValueError(f"kernel_eval's build folder {root} is inside the candidates' build root {build_root}: "
                         "candidates could plant the judge's code there (set CUDAL1_KERNEL_EVAL_ROOT elsewhere)")
    arch = arch or device_arch()
    with _PREPARE_LOCK:
        known = _PREPARED.get((root, arch))
        if known and os.path.isfile(known["path"]) and _sha256_file(known["path"]) == known["sha256"]:
            return dict(known, build_s=0.0)       # else changed since this process built or checked it: rebuilt
        nvcc = nvcc or find_nvcc()
        source = open(SOURCE, "rb").read()
        version = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
        folder = os.path.join(root, build_key(source, version, arch))
        os.makedirs(folder, mode=0o700, exist_ok=True)
        from filelock import FileLock
        so, recorded = os.path.join(folder, "kernel_eval.so"), os.path.join(folder, "kernel_eval.so.sha256")
        with FileLock(os.path.join(folder, "lock"), timeout=600):
            build_s = 0.0
            digest = _sha256_file(so) if os.path.isfile(so) else None
            if known or digest is None or not os.path.isfile(recorded) or open(recorded).read().strip() != digest:
                digest, build_s = _build(nvcc, source, arch, folder, so, recorded)
        info = dict(path=so, sha256=digest, arch=arch)
        _PREPARED[(root, arch)] = info
        return dict(info, build_s=build_s)


def _build(nvcc, source, arch, folder, so, recorded):
    """nvcc on a private copy of the source (the one hashed), into a temporary name renamed into place."""
    t0 = time.perf_counter()
    tmp = tempfile.mkdtemp(prefix="build.", dir=folder)
    try:
        src = os.path.join(tmp, "kernel_eval.cu")
        with open(src, "wb") as f:
            f.write(source)
        num = arch.split("_")[-1]
        out = os.path.join(tmp, "kernel_eval.so")
        cmd = [nvcc, *NVCC_FLAGS, f"-gencode=arch=compute_{num},code=sm_{num}", "-o", out, src]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp)
        if p.returncode != 0:
            raise RuntimeError(f"building kernel_eval.cu failed ({' '.join(cmd)}):\n{(p.stderr or p.stdout)[-3000:]}")
        digest = _sha256_file(out)
        os.replace(out, so)                         # atomic: a reader sees the old file or the new one
        with open(os.path.join(tmp, "sha256"), "w") as f:
            f.write(digest + "\n")
        os.replace(os.path.join(tmp, "sha256"), recorded)
        return digest, time.perf_counter() - t0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def for_worker(device, build_root=None):
    """The spec entry of a judge or runner on `device`: prepare()'s {path, sha256} on a CUDA device where a GPU is
    visible, else None (the CPU device and build-only runners on a machine without a GPU need no library)."""
    if not str(device).startswith("cuda") or not torch.cuda.is_available():
        return None
    info = prepare(build_root=build_root)
    return dict(path=info["path"], sha256=info["sha256"])


# ------------------------------------------------------------------------------------------------- loading

_LIB = []


def load(info):
    """Loads the library of a prepare() result {path, sha256}: the file is read once, its sha256 checked, and those
    bytes loaded from an anonymous memory file (a private temporary file where memfd is missing), so what runs is
    what was hashed. Raises RuntimeError when the hash differs."""
    with open(info["path"], "rb") as f:
        data = f.read()
    digest = hashlib.sha256(data).hexdigest()
    if digest != info["sha256"]:
        raise RuntimeError(f"{info['path']} has sha256 {digest[:16]}..., expected {info['sha256'][:16]}...: the "
                           "evaluator's library was changed after it was built; refusing to load it")
    lib = None
    with contextlib.suppress(OSError, AttributeError):
        fd = os.memfd_create("cudal1_kernel_eval", os.MFD_CLOEXEC)
        try:
            os.write(fd, data)
            lib = ctypes.CDLL(f"/proc/self/fd/{fd}")
        finally:
            os.close(fd)
    if lib is None:
        folder = tempfile.mkdtemp(prefix="cudal1_kernel_eval_")
        path = os.path.join(folder, "kernel_eval.so")
        try:
            with open(path, "wb") as f:
                f.write(data)
            lib = ctypes.CDLL(path)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    _declare(lib)
    if lib.cudal1_abi_version() != ABI_VERSION:
        raise RuntimeError(f"kernel_eval library ABI {lib.cudal1_abi_version()}, expected {ABI_VERSION}")
    _LIB[:] = [lib]
    return lib


def _declare(lib):
    c_void_p, c_int, c_int64, c_double = ctypes.c_void_p, ctypes.c_int, ctypes.c_int64, ctypes.c_double
    lib.cudal1_abi_version.restype = c_int
    lib.cudal1_error_string.restype, lib.cudal1_error_string.argtypes = ctypes.c_char_p, [c_int]
    lib.cudal1_l2_flush.argtypes = [c_int, c_void_p, c_int64, c_void_p]
    lib.cudal1_spin.argtypes = [c_int, ctypes.c_longlong, c_void_p]
    lib.cudal1_poison_fill.argtypes = [c_int, c_void_p, c_int64, c_void_p]
    lib.cudal1_checksum.argtypes = [c_int, c_void_p, c_int64, c_void_p, c_void_p]
    lib.cudal1_compare_workspace.restype, lib.cudal1_compare_workspace.argtypes = c_int64, [c_int64]
    lib.cudal1_compare.argtypes = [c_int, c_int, c_void_p, c_void_p, c_void_p, c_int64, c_double, c_double, c_void_p,
                                   c_void_p]
    for name in ("l2_flush", "spin", "poison_fill", "checksum", "compare"):
        getattr(lib, "cudal1_" + name).restype = c_int


def lib():
    """The loaded library; loaded now from prepare() when this process has none (a trusted process: tests,
    scripts; workers get theirs from the parent's spec through load())."""
    if not _LIB:
        load(prepare())
    return _LIB[0]


def _ck(rc, what):
    if rc != 0:
        raise RuntimeError(f"kernel_eval {what} failed: CUDA error {rc} "
                           f"{lib().cudal1_error_string(rc).decode(errors='replace')}")


def _where(dev):
    dev = torch.device(dev) if dev is not None else torch.device("cuda", torch.cuda.current_device())
    index = dev.index if dev.index is not None else torch.cuda.current_device()
    return index, torch.cuda.current_stream(index).cuda_stream


# ----------------------------------------------------------------------------------------- flush, spin, fill

def l2_flush(buf):
    """Resets persisting L2 lines, then writes word i of `buf` (a contiguous tensor of a multiple of 16 bytes,
    16-byte aligned) with i, on the current stream. CPU tensors: the same words written by torch."""
    nbytes = buf.numel() * buf.element_size()
    if nbytes % 16 or buf.data_ptr() % 16 or not buf.is_contiguous():
        raise ValueError(f"the flush buffer must be contiguous, 16-byte aligned and a multiple of 16 bytes "
                         f"({nbytes} bytes at {buf.data_ptr():#x})")
    if not buf.is_cuda:
        return l2_flush_torch(buf)
    index, stream = _where(buf.device)
    _ck(lib().cudal1_l2_flush(index, buf.data_ptr(), nbytes, stream), "l2_flush")


def l2_flush_torch(buf):
    """The words the flush kernel writes (word i = i mod 2^32), by torch (no L2 to reset)."""
    words = buf.view(torch.uint8).view(torch.int32)
    words.copy_(torch.arange(words.numel(), dtype=torch.int64, device=buf.device).to(torch.int32))


def spin(cycles, dev=None):
    """One thread spinning `cycles` SM clock cycles on the current stream of `dev` (a CUDA device)."""
    index, stream = _where(dev)
    _ck(lib().cudal1_spin(index, int(cycles), stream), "spin")


def poison_fill(t):
    """Every byte of tensor `t` (contiguous) to 0xFF, on the current stream; CPU tensors by torch."""
    if not t.is_cuda:
        return poison_fill_torch(t)
    if not t.is_contiguous():
        raise ValueError("poison_fill needs a contiguous tensor")
    poison_fill_ptr(t.data_ptr(), t.numel() * t.element_size(), t.device)


def poison_fill_ptr(ptr, nbytes, dev=None):
    """Every byte of device memory [ptr, ptr + nbytes) to 0xFF, on the current stream of `dev`."""
    index, stream = _where(dev)
    _ck(lib().cudal1_poison_fill(index, int(ptr), int(nbytes), stream), "poison_fill")


def poison_fill_torch(t):
    t.view(-1).view(torch.uint8).fill_(255)


# ---------------------------------------------------------------------------------------------------- checksum

def checksum(tensors, chunk=CHUNK):
    """Sum of the bytes plus 3x the sum of the int32 words (signed, little-endian, from each tensor's first byte) of
    each tensor's raw bytes, an int; equal on both sides for the same bytes, whatever device holds them. All-CUDA
    lists use the kernel (one read of the bytes, one synchronisation); otherwise checksum_torch."""
    tensors = list(tensors)
    if not tensors or not all(t.is_cuda for t in tensors):
        return checksum_torch(tensors, chunk)
    return checksum_value(checksum_start(tensors))


def checksum_start(tensors):
    """checksum()'s kernels queued on the current stream over CUDA `tensors` (none read back: no synchronisation);
    returns their accumulator (int64, 4 words), for checksum_value once the stream has passed them."""
    acc = torch.zeros(4, dtype=torch.int64, device=tensors[0].device)
    index, stream = _where(tensors[0].device)
    for t in tensors:
        t = t.detach()
        if not t.is_contiguous():
            t = t.contiguous()               # (the caching allocator keeps its memory until the stream passed it)
        _ck(lib().cudal1_checksum(index, t.data_ptr(), t.numel() * t.element_size(), acc.data_ptr(), stream),
            "checksum")
    return acc


def checksum_value(acc):
    """The checksum (an int) from checksum_start's accumulator (reads it back: synchronises its stream)."""
    nbytes, lo16, hi16, neg = (v % (1 << 64) for v in acc.tolist())     # the uint64 bits of each sum
    return nbytes + 3 * (lo16 + (hi16 << 16) - (neg << 32))


def _raw(t):
    b = t.detach().contiguous().reshape(-1).view(torch.uint8)
    return b, b[:b.numel() // 4 * 4].view(torch.int32)


def _int_sum(v, chunk):
    if v.device.type == "cpu":
        return int(v.numpy().sum(dtype=numpy.uint64 if v.dtype == torch.uint8 else numpy.int64))
    return sum(int(v[i:i + chunk].sum(dtype=torch.int64)) for i in range(0, v.numel(), chunk))


def checksum_torch(tensors, chunk=CHUNK):
    """checksum() by numpy (CPU tensors) or torch, in chunks of `chunk` bytes (bounded temporaries)."""
    total = 0
    for t in tensors:
        b, w = _raw(t)
        total += _int_sum(b, chunk) + 3 * _int_sum(w, chunk // 4)
    return total


# ----------------------------------------------------------------------------------------------------- compare

def compare(out, ref, atol, rtol, ref64=None):
    """One pass over out and ref (same number of elements, compared in logical order) and ref64 (float64, the same
    number, or None). Returns a dict:
      max_abs   max |o - r| over the elements where it is not NaN (0.0 when none)
      max_rel   max |o - r| / (|r| + 1e-12) over the elements where that is not NaN (0.0 when none)
      mismatches  PyTorch's isclose rule with equal_nan=False: not (o == r or |o - r| <= atol + rtol * |r| with r
                finite), so any NaN mismatches, equal infinities match and nothing else matches an infinite r;
                integer and bool tensors must be equal
      nans      elements where o is NaN and r is not
    all computed in float64 when either tensor is float64, else float32 (float16/bfloat16/integers converted), and,
    with ref64 (else 0 / 0.0):
      mismatches_vs64  not (o == t or |o - t| <= atol + rtol * |t| + |r - t|, that bound finite) in float64, t = ref64
      err_sq, ref_sq, ref_err_sq  the float64 sums of (o - t)^2, t^2 and (r - t)^2, each in tiles of TILE elements
                summed as pairwise trees, then the tile sums likewise (kernel_eval.cu), so the kernel and the torch
                version give the same bits.
    CUDA tensors of one dtype in _DTYPE_CODES use the kernel; anything else compare_torch."""
    o, r = out.detach().reshape(-1), ref.detach().reshape(-1)
    t = ref64.detach().reshape(-1) if ref64 is not None else None
    if o.numel() != r.numel() or (t is not None and t.numel() != o.numel()):
        raise ValueError(f"compare: {o.numel()} elements against {r.numel()}"
                         + (f" and {t.numel()} in float64" if t is not None else ""))
    kernel = o.is_cuda and r.device == o.device and o.dtype == r.dtype and o.dtype in _DTYPE_CODES and \
        (t is None or (t.device == o.device and t.dtype == torch.float64))
    if not kernel:
        return compare_torch(o, r, atol, rtol, t)
    o, r = o.contiguous(), r.contiguous()
    t = t.contiguous() if t is not None else None
    L = lib()
    work = torch.empty(L.cudal1_compare_workspace(o.numel()), dtype=torch.int64, device=o.device)
    index, stream = _where(o.device)
    _ck(L.cudal1_compare(index, _DTYPE_CODES[o.dtype], o.data_ptr(), r.data_ptr(), t.data_ptr() if t is not None else
                         None, o.numel(), float(atol), float(rtol), work.data_ptr(), stream), "compare")
    head = work[:8].cpu()
    counts, sums = head.tolist(), head.view(torch.float64).tolist()
    return dict(max_abs=sums[0], max_rel=sums[1], mismatches=counts[2], nans=counts[3], mismatches_vs64=counts[4],
                err_sq=sums[5], ref_sq=sums[6], ref_err_sq=sums[7])


def _tile_sums(x):
    """x (float64, 1-D) padded with zeros to whole tiles of TILE, each tile summed as kernel_eval.cu's tree."""
    x = torch.nn.functional.pad(x, (0, (-x.numel()) % TILE)).view(-1, TILE)
    while x.shape[1] > 1:
        h = x.shape[1] // 2
        x = x[:, :h] + x[:, h:]
    return x[:, 0]


def _tree_total(partials):
    while partials.numel() > 1:
        partials = _tile_sums(partials)
    return float(partials[0]) if partials.numel() else 0.0


def compare_torch(out, ref, atol, rtol, ref64=None, chunk=CHUNK):
    """compare() by torch, in chunks of `chunk` elements (a multiple of TILE; no full-size temporaries)."""
    o, r = out.detach().reshape(-1), ref.detach().reshape(-1)
    t = ref64.detach().reshape(-1) if ref64 is not None else None
    assert chunk % TILE == 0, f"chunk {chunk} is not a multiple of {TILE}"
    wide = torch.float64 if torch.float64 in (o.dtype, r.dtype) else torch.float32
    exact = not (o.is_floating_point() or o.is_complex()) and not (r.is_floating_point() or r.is_complex())
    atol_w, rtol_w = torch.tensor(atol, dtype=wide), torch.tensor(rtol, dtype=wide)
    res = dict(max_abs=0.0, max_rel=0.0, mismatches=0, nans=0, mismatches_vs64=0)
    partials = [[], [], []]
    for i in range(0, o.numel(), chunk):
        oc, rc = o[i:i + chunk].to(wide), r[i:i + chunk].to(wide)
        d = (oc - rc).abs()
        tol = atol_w + rtol_w * rc.abs()                  # infinite for an infinite reference: then only equal matches
        ok = (oc == rc) if exact else (oc == rc) | (tol.isfinite() & (d <= tol))
        dv = d[~d.isnan()]
        rel = dv / (rc[~d.isnan()].abs() + 1e-12)
        rel = rel[~rel.isnan()]
        res["max_abs"] = max(res["max_abs"], float(dv.max()) if dv.numel() else 0.0)
        res["max_rel"] = max(res["max_rel"], float(rel.max()) if rel.numel() else 0.0)
        res["mismatches"] += int((~ok).sum())
        res["nans"] += int((oc.isnan() & ~rc.isnan()).sum())
        if t is not None:
            tc, o64, r64 = t[i:i + chunk].double(), oc.double(), rc.double()
            e, f = o64 - tc, r64 - tc
            tol64 = atol + rtol * tc.abs() + f.abs()
            ok64 = (o64 == tc) | (tol64.isfinite() & (e.abs() <= tol64))
            res["mismatches_vs64"] += int((~ok64).sum())
            for k, v in enumerate((e * e, tc * tc, f * f)):
                partials[k].append(_tile_sums(v))
    for k, name in enumerate(("err_sq", "ref_sq", "ref_err_sq")):
        res[name] = _tree_total(torch.cat(partials[k])) if partials[k] else 0.0
    return res
