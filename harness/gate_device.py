"""gate_device.py: the gate's sides that run beside the device (gate.py has the protocol and the parent's side): the
driver calls (stream waits and writes on pinned host pages), the judge's input buffer and its layout, the null model
of the calibration, the runner's side (RunnerGate: each gated call on its stream) and the judge's (JudgeInputs: a
call's inputs sealed with its key).
"""
import ctypes, mmap, os, secrets

import numpy as np
import torch

from harness import exchange
from harness import kernel_eval
from harness.gate import ARMED, DONE, GATE, KEY, PAGE, SYNCED

_REGISTER = dict(portable=0x1, devicemap=0x2, read_only=0x8)    # cuMemHostRegister flags

# ------------------------------------------------------------------------------------------ the driver

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
        lib.cuInit(0)                               # (torch did it already in a process on a GPU: harmless)
        lib.cuGetErrorString.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        fns["error"] = lib.cuGetErrorString
        _DRIVER.append(fns)
    return _DRIVER[0]


def _cu(rc, what):
    if rc != 0:
        msg = ctypes.c_char_p()
        _driver()["error"](rc, ctypes.byref(msg))
        raise RuntimeError(f"{what} failed: CUresult {rc} {(msg.value or b'').decode(errors='replace')}")


def _pin(mm, flags):
    """The device address of mapped page `mm`, pinned by the driver with `flags` (_REGISTER names)."""
    host = np.frombuffer(mm, dtype=np.uint8).ctypes.data         # (a read-only mapping has an address too)
    drv = _driver()
    _cu(drv["cuMemHostRegister"](host, PAGE, sum(_REGISTER[f] for f in flags)), "cuMemHostRegister")
    dptr = ctypes.c_uint64()
    _cu(drv["cuMemHostGetDevicePointer"](ctypes.byref(dptr), host, 0), "cuMemHostGetDevicePointer")
    return dptr.value


# ------------------------------------------------------------------------------------------ the inputs' buffer

def input_layout(inputs):
    """[(offset, nbytes, dtype, shape) or None] per input of a task: a tensor's place in the judge's input buffer
    (256-byte aligned), None for a value that is not a tensor (each side uses its own: they do not depend on the
    seed). Raises ValueError for a tensor the buffer cannot hold as stored (not contiguous)."""
    out, off = [], 0
    for i, x in enumerate(inputs):
        if not isinstance(x, torch.Tensor):
            out.append(None)
            continue
        if not x.is_contiguous():
            raise ValueError(f"input {i} is not contiguous: the gate delivers inputs as stored")
        n = x.numel() * x.element_size()
        out.append((off, n, str(x.dtype).removeprefix("torch."), list(x.shape)))
        off += (n + 255) // 256 * 256
    return out


def open_buffer(spec):
    """The judge's input buffer as a runner sees it (spec: JudgeInputs.allocate's): the device address of the
    allocation (CUDA IPC), or the file mapped read-only."""
    if spec["kind"] == "ipc":
        return exchange.ipc_open(spec["handle"])
    fd = os.open(spec["path"], os.O_RDONLY)
    try:
        return mmap.mmap(fd, 0, prot=mmap.PROT_READ)
    finally:
        os.close(fd)


def _bytes(t):
    """The raw bytes of a contiguous CPU tensor as a writable uint8 numpy array (shared memory)."""
    return t.view(-1).view(torch.uint8).numpy()


class NullModel:
    """The model of the gate's calibration: each call allocates tensors of the reference output's layout (the
    judge's [(offset, nbytes, dtype, shape)]) and writes all their bytes with a keystream that changes call by call,
    as a model writes its output. Its writes' time (CUDA events, before any candidate code is imported) is taken off
    the fixed cost (Calibration); its delivery, like a model's, comes after SYNCED, so the null's DONE-to-reply time,
    which bounds the reply's tail, includes the copy of an output just written (dearer than one at rest)."""

    def __init__(self, layout, dev):
        self.layout, self.dev, self.calls = layout, dev, 0
        self.key = torch.tensor([secrets.randbits(63)], dtype=torch.int64, device=dev)

    def __call__(self, *inputs):
        self.calls += 1
        out = [torch.empty(shape, dtype=getattr(torch, dtype), device=self.dev) for _, _, dtype, shape in self.layout]
        for t in out:
            first, n = self.calls << 40, t.numel() * t.element_size()
            if self.dev.type == "cuda":
                kernel_eval.keystream_xor(t.data_ptr(), t.data_ptr(), n, first, self.key, self.dev)
            else:
                _bytes(t)[:] = kernel_eval.keystream_numpy(n, first, int(self.key))
        return out[0] if len(out) == 1 else tuple(out)


# ------------------------------------------------------------------------------------------ the runner's side

class RunnerGate:
    """The runner's side: the done page (fd: DONE, ARMED, SYNCED) mapped and pinned, the gate page (gate_fd: GATE, KEY)
    mapped read-only and pinned read-only, the judge's input buffer (`buffer`, open_buffer's) with its `layout`, and
    the runner's own input tensors the models read (`inputs`: make_inputs' at the task's seed, their values replaced
    call by call with the opened ones; the values that are not tensors stay as they are). Raises RuntimeError where
    the driver refuses (no stream memory ops, no read-only registration) or the output exchange is not CUDA IPC. On
    the CPU device (HOST_ENV) the host plays the stream."""

    def __init__(self, fd, gate_fd, dev, exchange_, buffer, layout, inputs):
        self.dev, self.host, self.buffer, self.inputs = dev, dev.type != "cuda", buffer, inputs
        self.stages = None                     # the last call's [opening, model, delivery] ms by CUDA events
        self.sealed = [(off, n, x) for item, x in zip(layout, inputs) if item is not None for off, n, _, _ in [item]]
        self.mm = mmap.mmap(fd, PAGE)
        self.words = memoryview(self.mm).cast("I")
        self.gate_mm = mmap.mmap(gate_fd, PAGE, prot=mmap.PROT_READ)     # sealed: PROT_WRITE is refused
        self.gate_words = memoryview(self.gate_mm).cast("I")
        if self.host:
            return
        if exchange_ is None or exchange_.ptr is None:
            raise RuntimeError("the output exchange is not CUDA IPC (a file): no gate")
        torch.zeros(1, device=dev)                             # the primary context, current on this thread
        self.dptr = _pin(self.mm, ("portable", "devicemap"))
        self.gate_dptr = _pin(self.gate_mm, ("portable", "devicemap", "read_only"))
        self.key = torch.zeros(1, dtype=torch.int64, device=dev)
        l2 = getattr(torch.cuda.get_device_properties(dev), "L2_cache_size", 0)
        self.flush_buf = torch.empty(2 * l2 if l2 > 0 else 256 << 20, dtype=torch.uint8, device=dev)
        self.events = [torch.cuda.Event(enable_timing=True) for _ in range(5)]

    def call(self, model, call_id, exchange_, leaves):
        """One gated call (module docstring); exchange_: the runner's Exchange; leaves(out): the output's leaves.
        Returns (ms by CUDA events on the stream around the model: a diagnostic, never counted; checksum; memory
        orders of the leaves; the output); checksum and orders None when the output does not fit the judge's layout
        (the judge names the mismatch from the output's meta)."""
        if self.host:
            return self._host_call(model, call_id, exchange_, leaves)
        drv, stream = _driver(), torch.cuda.current_stream(self.dev)
        kernel_eval.l2_flush(self.flush_buf)       # before the gate: its write-backs are not the model's to pay
        torch.cuda.synchronize()                   # (and this thread's context current for the driver calls)
        _cu(drv["cuStreamWaitValue32"](stream.cuda_stream, self.gate_dptr + 4 * GATE, call_id, 0x0), "wait")  # GEQ
        opened, start, end, deliver, delivered = self.events
        opened.record(stream)
        kernel_eval.key_load(self.gate_dptr + 4 * KEY, self.key)
        for off, n, x in self.sealed:              # the inputs opened into the runner's own tensors (in the L2 as
            kernel_eval.keystream_xor(x.data_ptr(), self.buffer + off, n, off // 8, self.key, self.dev)  # written)
        start.record(stream)
        out = model(*self.inputs)
        end.record(stream)
        # flags 0: the write waits for the model's memory operations (NO_MEMORY_BARRIER is refused on the H200)
        _cu(drv["cuStreamWriteValue32"](stream.cuda_stream, self.dptr + 4 * DONE, call_id, 0x0), "write")
        self.words[ARMED] = call_id
        torch.cuda.synchronize()                   # the whole device: work left on other streams delays SYNCED
        self.words[SYNCED] = call_id
        deliver.record(stream)                     # after the window and the sync: every stream's writes are in
        with torch.cuda.stream(stream):            # the gated stream, whatever the model left current
            try:
                flat = exchange_.copy([x for x in leaves(out) if isinstance(x, torch.Tensor)], stream.cuda_stream)
            except ValueError:
                flat = None
            acc = kernel_eval.checksum_start(flat) if flat else None
        delivered.record(stream)
        delivered.synchronize()
        self.stages = [opened.elapsed_time(start), start.elapsed_time(end), deliver.elapsed_time(delivered)]
        if flat is None:
            return start.elapsed_time(end), None, None, out
        cs = kernel_eval.checksum_value(acc) if flat else 0          # no tensor leaf: the sum of nothing
        return start.elapsed_time(end), cs, exchange_.orders, out

    def _host_call(self, model, call_id, exchange_, leaves):
        """call() on the CPU device, the host in the stream's place: armed, the gate awaited, the inputs opened, the
        model, DONE, the output delivered. It tests the protocol's plumbing end to end; a host can forge every
        word, so it is no clock to trust (hence opt-in by HOST_ENV alone)."""
        self.words[ARMED] = call_id
        while self.gate_words[GATE] < call_id:
            os.sched_yield()
        key = self.gate_words[KEY] | self.gate_words[KEY + 1] << 32
        sealed = np.frombuffer(self.buffer, dtype=np.uint8)
        for off, n, x in self.sealed:
            _bytes(x)[:] = sealed[off:off + n] ^ kernel_eval.keystream_numpy(n, off // 8, key)
        out = model(*self.inputs)
        self.words[DONE] = call_id
        self.words[SYNCED] = call_id
        try:
            flat = exchange_.copy([x for x in leaves(out) if isinstance(x, torch.Tensor)])
        except ValueError:
            flat = None
        return 0.0, None if flat is None else kernel_eval.checksum(flat), exchange_.orders, out


# ------------------------------------------------------------------------------------------ the judge's side

class JudgeInputs:
    """The judge's side: the input buffer of the current task (allocate()) and seal(), which writes a call's inputs
    into it XORed with the keystream of the call's key."""

    def __init__(self, dev):
        self.dev, self.host, self.buffer, self.layout, self.key = dev, dev.type != "cuda", None, None, None

    def allocate(self, inputs, path=None):
        """A buffer for `inputs` (a task's, from make_inputs): a cudaMalloc'd allocation of its own shared by CUDA
        IPC, or on the CPU device the file `path`. Returns the runner's spec: dict(kind, handle | path, layout).
        Raises ValueError for inputs the buffer cannot hold (input_layout)."""
        self.release()
        self.layout = input_layout(inputs)
        total = max([off + n for off, n, _, _ in filter(None, self.layout)] + [256])
        if self.host:
            with open(path, "wb") as f:
                f.truncate(total)
            fd = os.open(path, os.O_RDWR)
            try:
                self.buffer = dict(kind="file", path=path, mm=mmap.mmap(fd, total))
            finally:
                os.close(fd)
            return dict(kind="file", path=path, layout=self.layout)
        ptr, handle = exchange.ipc_alloc(total)
        self.buffer = dict(kind="ipc", ptr=ptr)
        self.key = torch.zeros(1, dtype=torch.int64, device=self.dev)
        return dict(kind="ipc", handle=handle, layout=self.layout)

    def release(self):
        if self.buffer and self.buffer["kind"] == "ipc":
            torch.cuda.synchronize(self.dev)
            exchange.cudart().cudaFree(ctypes.c_void_p(self.buffer["ptr"]))
        elif self.buffer:
            self.buffer["mm"].close()
        self.buffer = None

    def seal(self, inputs, key):
        """`inputs` (made from the call's seed) XORed with the keystream of `key` (64-bit) into the buffer; returns
        once they are there. Raises RuntimeError for inputs of another layout than the buffer's."""
        if self.buffer is None:
            raise RuntimeError("no input buffer: allocate() first")
        tensors = [(item, x) for item, x in zip(self.layout, inputs) if item is not None]
        for (_, n, _, shape), x in tensors:
            if not isinstance(x, torch.Tensor) or x.numel() * x.element_size() != n or not x.is_contiguous():
                raise RuntimeError(f"an input of shape {shape} came out as {getattr(x, 'shape', type(x))} for this "
                                   "seed: the gate needs inputs of one layout")
        if self.host:
            for (off, n, _, _), x in tensors:
                self.buffer["mm"][off:off + n] = (_bytes(x) ^ kernel_eval.keystream_numpy(n, off // 8, key)).tobytes()
            return
        self.key.fill_(key - (1 << 64) if key >= 1 << 63 else key)      # its bits, as a signed int64
        for (off, n, _, _), x in tensors:
            kernel_eval.keystream_xor(self.buffer["ptr"] + off, x.data_ptr(), n, off // 8, self.key, self.dev)
        torch.cuda.current_stream(self.dev).synchronize()
