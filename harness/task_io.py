"""task_io.py: a task's models, inputs and outputs, made and described the same way in the judge (judge.py) and in
the runner (runner.py): the fixed backend flags (FIXED_FLAGS, set_flags, get_flags), modules loaded from a file or
from source text, the models built under the seed and the inputs made from a seed (for one seed the judge and the
runner get the same tensors), and what a runner reports about outputs and inputs (leaves, meta, fingerprint,
aliases). A module of its own because both sides need it and neither side's loop does; in a runner it runs beside
the candidate, so what it reports there is a first filter only (runner.py's docstring).
"""
import contextlib, importlib.util, sys

import numpy
import torch

SEED = 42                                  # KernelBench: both models built right after manual_seed(42)
FIXED_FLAGS = dict(matmul_allow_tf32=False, cudnn_allow_tf32=True, cudnn_benchmark=False,
                   cudnn_deterministic=False, float32_matmul_precision="highest")   # PyTorch defaults, §2


_FLAG_ATTRS = dict(matmul_allow_tf32=(torch.backends.cuda.matmul, "allow_tf32"),
                   cudnn_allow_tf32=(torch.backends.cudnn, "allow_tf32"),
                   cudnn_benchmark=(torch.backends.cudnn, "benchmark"),
                   cudnn_deterministic=(torch.backends.cudnn, "deterministic"))


def get_flags():
    flags = {}
    for k, (owner, attr) in _FLAG_ATTRS.items():
        try:   # torch >= 2.9 raises here when the legacy and the new (fp32_precision) TF32 APIs were mixed
            flags[k] = bool(getattr(owner, attr))
        except Exception as e:
            flags[k] = f"unreadable: {e}"[:80]
    try:
        flags["float32_matmul_precision"] = torch.get_float32_matmul_precision()
    except Exception as e:                     # e.g. fp32_precision="tf32" left set: the legacy getter raises
        flags["float32_matmul_precision"] = f"unreadable: {e}"[:80]
    return flags


def set_flags(flags):
    """Sets the backend flags (FIXED_FLAGS's keys); a candidate that switched to the fp32_precision API is put
    back on the legacy one first (torch >= 2.9 refuses to mix them)."""
    with contextlib.suppress(Exception):
        torch.backends.fp32_precision = "ieee"
        for owner in (torch.backends.cuda.matmul, torch.backends.cudnn.conv, torch.backends.cudnn.rnn):
            owner.fp32_precision = "none"
    torch.set_float32_matmul_precision(flags["float32_matmul_precision"])
    for k, (owner, attr) in _FLAG_ATTRS.items():
        setattr(owner, attr, flags[k])


def load_module(path, name):
    """Executes a source file into its own fresh module, registered in sys.modules under a unique name."""
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def load_source(src, name):
    """A module executed from source text (the judge never reads a task from a file a candidate could rewrite)."""
    mod = type(sys)(name)
    mod.__file__ = f"<{name}>"
    sys.modules[name] = mod
    exec(compile(src, f"<{name}>", "exec"), mod.__dict__)
    return mod


def make_inputs(task, seed, dev):
    """task.get_inputs() right after manual_seed(seed), made on `dev` directly: the judge and the runner call this
    with the same seed and get the same tensors (CUDA's Philox generator is deterministic per seed)."""
    torch.manual_seed(seed)
    with torch.device(dev):
        inputs = task.get_inputs()
    return [x.to(dev) if isinstance(x, torch.Tensor) else x for x in inputs]


def build_model(task, cls, dev):
    """cls(*task.get_init_inputs()) under manual_seed(SEED) and `with torch.device(dev)` (KernelBench, §2: the
    weights match only because both models draw them in the same order from the same seed)."""
    torch.manual_seed(SEED)
    with torch.device(dev):
        init = [x.to(dev) if isinstance(x, torch.Tensor) else x for x in task.get_init_inputs()]
        torch.manual_seed(SEED)
        m = cls(*init)
    return m.to(dev) if isinstance(m, torch.nn.Module) else m


def leaves(out):
    """The tensors and numbers of a model output (tensor, list/tuple of them, number, None), depth first."""
    if isinstance(out, (list, tuple)):
        return [x for v in out for x in leaves(v)]
    return [out]


def meta(out):
    """JSON description of an output: [{kind, shape, dtype, type} | {kind: number, value} | {kind: none} | ...]."""
    res = []
    for x in leaves(out):
        if isinstance(x, torch.Tensor):
            res.append(dict(kind="tensor", shape=list(x.shape), dtype=str(x.dtype).replace("torch.", ""),
                            type=type(x).__name__, exact=type(x) is torch.Tensor))
        elif isinstance(x, (bool, int, float)):
            res.append(dict(kind="number", value=float(x)))
        elif x is None:
            res.append(dict(kind="none"))
        else:
            res.append(dict(kind="other", type=type(x).__name__))
    return res


def _isum(v, chunk):
    """The exact integer sum of an integer tensor `v` (uint8 or int32), in chunks of `chunk` elements: numpy on
    the CPU (10-15x faster than torch's widening sum there), torch on a GPU; the same value either way."""
    if v.device.type == "cpu":
        return int(v.numpy().sum(dtype=numpy.uint64 if v.dtype == torch.uint8 else numpy.int64))
    return sum(int(v[i:i + chunk].sum(dtype=torch.int64)) for i in range(0, v.numel(), chunk))


def _words(t):
    """A tensor's raw bytes (uint8) and its whole int32 words, as flat views (no copy if contiguous)."""
    b = t.detach().contiguous().reshape(-1).view(torch.uint8)
    return b, b[:b.numel() // 4 * 4].view(torch.int32)


def fingerprint(inputs, chunk=1 << 26):
    """Cheap checksums of the bytes of every input tensor, in chunks of `chunk` bytes (bounded temporaries: a
    6.4 GB input must not become a 51 GB int64 copy): an in-place change of an input shows (§4)."""
    fp = []
    for x in inputs:
        if isinstance(x, torch.Tensor):
            b, w = _words(x)
            fp.append([_isum(b, chunk), _isum(w, chunk // 4), _isum(w[::7], chunk // 4)])
    return fp


def _span(t):
    s = t.untyped_storage()
    return s.data_ptr(), s.data_ptr() + s.nbytes()


def aliases(t, inputs):
    a0, a1 = _span(t)
    return a1 > a0 and any(isinstance(x, torch.Tensor) and x.device == t.device and _span(x)[0] < a1
                           and a0 < _span(x)[1] for x in inputs)
