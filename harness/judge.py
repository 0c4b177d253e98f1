"""judge.py: the trusted side of bench.py. A worker process where no candidate code ever runs.

One judge per GPU is forked from the fork server before any candidate and kept for the whole run. The judge imports
the TASK (the user's file, as text) and our own code, never a candidate, never a compiled extension from the build
cache that candidates write to (so a planted .so cannot take it over), and receives from candidates only raw bytes
in a buffer it owns plus JSON metadata it validates. It:
  - builds the reference `Model` (manual_seed(42), FIXED_FLAGS) and, from the same seeds the runner is given,
    generates the inputs itself and computes the expected outputs itself, in float32 and in float64;
  - compares a candidate's output with them: exact output structure, shapes and dtypes (the dtype must EQUAL the
    reference's: a float16 answer to a float32 task is a precision downgrade, REFERENCE.md §4c), then PyTorch's
    isclose rule at atol/rtol, in one pass with no full-size temporaries (kernel_eval.compare);
  - measures precision (§4c): err(x) = ||x - ref64|| / ||ref64|| over the floating outputs. A candidate is a
    `precision_downgrade` when err(candidate) > max(PREC_RATIO * err(fp32 reference), PREC_HALF * err(half)),
    where err(half) is the error of the float64 reference run on inputs AND weights rounded to a 10-bit mantissa
    (what TF32 or fp16 operands cost on this task), so the rule adapts to the task: a different reduction order
    changes the error by small factors, 16-bit or TF32 operands by about err(half). In tasks with convolutions
    PREC_HALF_CONV replaces PREC_HALF: PyTorch lets cuDNN use TF32 there by default. Calibration in the README;
  - screens the task for degenerate outputs (REFERENCE.md §3; cached per task source in its memory, never on
    disk, where a candidate could rewrite it);
  - measures, at setup, the device's copy bandwidth (for the physical floor, session.time_floor_ms) and a first
    estimate of the reference's time (ref_ms_est: 4 calls through runner.Clock; it sets a call's hang limit, the
    number of timed calls and the remeasure threshold, never the speedup). The reference's counted time (ref_ms)
    is measured in the candidate's runner before the candidate is imported (session.Session.reference), so that
    both sides pay the same fixed overhead per call.
Nothing it computes depends on anything a candidate process says except the bytes being judged.
"""
import contextlib, copy, ctypes, hashlib, json, math, os, random, re, statistics, time

import torch

from harness import cores
from harness import exchange
from harness import gate_device
from harness import kernel_eval
from harness import runner
from harness import task_io

PREC_RATIO = 16.0     # a candidate may be this many times less accurate than the fp32 reference (vs float64)...
PREC_HALF = 0.5       # ...or up to this share of the error that 10-bit-mantissa operands (TF32/fp16) would cause
PREC_HALF_CONV = 2.0  # ... this share where the task has convolutions: PyTorch lets cuDNN use TF32 there by default
PREC_MAX_GB = 24.0    # float64 references are skipped when the inputs and outputs take more than this (GB)
TRIVIAL_OUTPUTS = ("zeros", "constant", "mean", "input")     # degenerate_screen's trivial outputs (§3)
ALIGN = 256


def trial_seeds(n):
    """The seeds of the correctness trials (KernelBench: seeds drawn from seed 42)."""
    rng = random.Random(task_io.SEED)
    return [rng.randrange(2 ** 31) for _ in range(n)]


# ---------------------------------------------------------------------------------------------- comparison

def compare(out, ref, atol, rtol):
    """[max_abs_err, max_rel_err, mismatches, nans] of out vs ref (same shape), PyTorch's isclose with
    equal_nan=False evaluated in float32 (float64 for float64 tensors): mismatch = not (o == r or |o - r| <= atol +
    rtol * |r|), so any NaN mismatches and equal infinities match; nans = NaNs in out where ref is not NaN;
    max_abs_err = max |o - r|, max_rel_err = max |o - r| / (|r| + 1e-12), each over the elements where it is not
    NaN (0 when none). Integer and bool outputs must be equal. One pass (kernel_eval.compare)."""
    s = kernel_eval.compare(out, ref, atol, rtol)
    return [s["max_abs"], s["max_rel"], float(s["mismatches"]), float(s["nans"])]


def _ratio(num, den):
    """sqrt(num / den), or None when either is not finite or den is 0."""
    if not (math.isfinite(num) and math.isfinite(den)) or den == 0:
        return None
    return math.sqrt(num / den)


def relerr(xs, refs):
    """||x - ref|| / ||ref|| over the pairs of floating tensors (float64 sums in kernel_eval's fixed order); None if
    undefined."""
    num = den = 0.0
    for x, r in zip(xs, refs):
        s = kernel_eval.compare(x, x, 0.0, 0.0, ref64=r.double() if r.dtype != torch.float64 else r)
        num, den = num + s["err_sq"], den + s["ref_sq"]
    return _ratio(num, den)


def round10(t):
    """t rounded to a 10-bit mantissa (round to nearest even), as TF32 and fp16 operands are; float64 result."""
    if not t.is_floating_point():
        return t
    i = t.float().contiguous().view(torch.int32)
    i = (i + 0x0FFF + ((i >> 13) & 1)) & ~0x1FFF
    return i.view(torch.float32).double()


def _floats(out):
    return [x for x in task_io.leaves(out) if isinstance(x, torch.Tensor) and x.is_floating_point()]


def _f64(x):
    return x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x


# ------------------------------------------------------------------------------------------------ the task

class _Task:
    """The current task's reference, its float64 twins (made on first use) and what setup found."""

    def __init__(self, src, key, dev, info):
        self.key, self.dev, self.info = key, dev, info
        self.mod = task_io.load_source(src, "cudal1_task_" + key[:16])
        task_io.set_flags(task_io.FIXED_FLAGS)
        with torch.no_grad():
            self.model = task_io.build_model(self.mod, self.mod.Model, dev)
        self._m64 = self._half = None

    def ref(self, seed):
        inputs = task_io.make_inputs(self.mod, seed, self.dev)
        task_io.set_flags(task_io.FIXED_FLAGS)
        with torch.no_grad():
            out = self.model(*inputs)
        if self.dev.type == "cuda":
            torch.cuda.synchronize()
        return inputs, out

    def ref64(self, inputs, half=False):
        """The float64 reference on these inputs (inputs and weights rounded to 10 bits when half)."""
        if self._m64 is None:
            self._m64 = copy.deepcopy(self.model).double() if isinstance(self.model, torch.nn.Module) else self.model
        m = self._m64
        if half:
            if self._half is None:
                self._half = copy.deepcopy(self._m64)
                if isinstance(self._half, torch.nn.Module):
                    with torch.no_grad():
                        for t in list(self._half.parameters()) + list(self._half.buffers()):
                            if t.is_floating_point():
                                t.copy_(round10(t))
            m = self._half
        with torch.no_grad():
            return m(*[(round10(x) if half else _f64(x)) if isinstance(x, torch.Tensor) else x for x in inputs])


def _layout(out):
    """[(offset, nbytes, dtype, shape)] of the tensor leaves, each at an ALIGN-byte offset, and the total."""
    lay, off = [], 0
    for x in task_io.leaves(out):
        if isinstance(x, torch.Tensor):
            n = x.numel() * x.element_size()
            lay.append((off, n, str(x.dtype).replace("torch.", ""), list(x.shape)))
            off += (n + ALIGN - 1) // ALIGN * ALIGN
    return lay, off


def _nbytes(x):
    if isinstance(x, torch.Tensor):
        return x.numel() * x.element_size()
    return sum(_nbytes(v) for v in x) if isinstance(x, (list, tuple)) else 0


def _trivial(name, ref, other, inputs):
    """The trivial output `name` shaped like ref: zeros; constant = the reference's output on other inputs (what a
    cache replays); mean = that output's mean everywhere; input = the first input reshaped (a copy)."""
    if isinstance(ref, (list, tuple)):
        return type(ref)(_trivial(name, r, o, inputs) for r, o in zip(ref, other))
    if not isinstance(ref, torch.Tensor):
        return other
    if name == "zeros":
        return torch.zeros_like(ref)
    if name == "constant":
        return other.clone()
    if name == "mean":
        m = other.double().mean() if other.numel() else 0.0
        return torch.full_like(ref, float(m) if ref.is_floating_point() else round(float(m)))
    x = next((t for t in inputs if isinstance(t, torch.Tensor)), None)
    if x is None or x.numel() != ref.numel():
        raise ValueError("no input with the output's number of elements")
    return x.detach().reshape(ref.shape).to(ref.dtype).clone()


def screen(task, seeds, atol, rtol):
    """{trivial output name: "passed" | "incorrect: ..." | "n/a: ..."} over the trial seeds (REFERENCE.md §3)."""
    status = {name: "passed" for name in TRIVIAL_OUTPUTS}
    _, other = task.ref(task_io.SEED + 7)                        # the output for other inputs
    for seed in seeds:
        inputs, ref = task.ref(seed)
        for name in TRIVIAL_OUTPUTS:
            if status[name] != "passed":
                continue
            try:
                triv = task_io.leaves(_trivial(name, ref, other, inputs))
                bad = sum(compare(t, r, atol, rtol)[2] for t, r in zip(triv, task_io.leaves(ref))
                          if isinstance(r, torch.Tensor))
                if bad:
                    status[name] = f"incorrect: {int(bad)} mismatches"
            except Exception as e:
                status[name] = f"n/a: {type(e).__name__}: {e}"[:200]
    return status


# ------------------------------------------------------------------------------------------------ the judge

class _Judge:
    def __init__(self, dev):
        self.dev, self.cuda = dev, dev.type == "cuda"
        self.infos, self.task, self.clocks, self.buffer_spec, self.bandwidth_gbs = {}, None, {}, None, None
        self.screens, self.gate = {}, gate_device.JudgeInputs(dev)

    def ensure(self, cmd):
        if self.task is None or self.task.key != cmd["task_key"]:
            self.task = None                              # free the previous task's model and buffers first
            if self.cuda:
                torch.cuda.empty_cache()
            self.task = _Task(cmd["task_src"], cmd["task_key"], self.dev, self.infos.get(cmd["task_key"]))
        return self.task

    def clock(self, protocol):
        if protocol not in self.clocks:
            self.clocks[protocol] = runner.Clock(self.dev, protocol)
        return self.clocks[protocol]

    def warm(self, cmd):
        """The CUDA context, the protocol's clock and the copy bandwidth, before any task (evaluate_many makes them
        while its first builds run, so that its first evaluation does not wait for them under the GPU's lock)."""
        if self.cuda:
            self.clock(cmd["protocol"])
            if self.bandwidth_gbs is None:
                self.bandwidth_gbs = _copy_bandwidth_gbs(self.dev)
        return dict(ok=True)

    def setup(self, cmd):
        """Everything about a task that the candidate's evaluation needs first; cached per task key."""
        key = cmd["task_key"]
        if key in self.infos:
            return self.infos[key]
        t = self.ensure(cmd)
        seeds = trial_seeds(cmd["trials"])
        inputs = task_io.make_inputs(t.mod, seeds[0], self.dev)
        fp = task_io.fingerprint(inputs)
        with torch.no_grad():
            out = t.model(*inputs)
        tensors = [x for x in task_io.leaves(out) if isinstance(x, torch.Tensor)]
        lay, total = _layout(out)
        info = dict(ok=True, meta=task_io.meta(out), layout=lay, total=total, seeds=seeds,
                    input_bytes=_nbytes(inputs), output_bytes=_nbytes(out),
                    device_name=torch.cuda.get_device_name(self.dev) if self.cuda else "cpu",
                    ref_aliases=any(task_io.aliases(x, inputs) for x in tensors if x.numel()),   # the task itself
                    ref_mutates=task_io.fingerprint(inputs) != fp)                              # returns/changes inputs
        if info["ref_mutates"]:
            inputs = task_io.make_inputs(t.mod, seeds[0], self.dev)
        # float64 references fit?  (their inputs and outputs, twice: the plain one and the rounded one)
        big = 2 * (info["input_bytes"] + info["output_bytes"]) * 2 / 1e9 > PREC_MAX_GB
        prec = dict(skipped="no floating outputs") if not _floats(out) else \
            dict(skipped=f"inputs+outputs over {PREC_MAX_GB:g} GB in float64") if big else {}
        if not prec:
            try:
                ref_err = relerr(_floats(out), _floats(t.ref64(inputs)))
                half_err = relerr(_floats(t.ref64(inputs, half=True)), _floats(t.ref64(inputs)))
                prec = dict(ref_err=ref_err, half_err=half_err) if ref_err is not None and half_err is not None \
                    else dict(skipped="float64 reference has no finite nonzero norm")
            except Exception as e:
                prec = dict(skipped=f"float64 reference failed: {type(e).__name__}: {e}"[:300])
        if "skipped" not in prec:           # cuDNN convolutions may use TF32 under PyTorch's defaults (REFERENCE §2)
            conv = any(isinstance(m, torch.nn.modules.conv._ConvNd) for m in t.model.modules()) \
                if isinstance(t.model, torch.nn.Module) else False
            prec["half_share"] = PREC_HALF_CONV if conv or re.search(r"conv\w*\s*\(", cmd["task_src"]) else PREC_HALF
        info["precision"] = prec
        if cmd.get("screen", True):       # cached in this process only: a file could be rewritten by a candidate
            skey = hashlib.sha256(json.dumps([cmd["task_src"], cmd["atol"], cmd["rtol"], seeds]).encode()).hexdigest()
            if skey not in self.screens:
                self.screens[skey] = screen(t, seeds, cmd["atol"], cmd["rtol"])
            info["screen"] = self.screens[skey]
        clock = self.clock(cmd["protocol"])               # a first reference time: the candidate's time limit
        times = [clock.call(t.model, task_io.make_inputs(t.mod, task_io.SEED + 11 + i, self.dev))[0] for i in range(4)]
        info["ref_ms_est"] = statistics.median(times[1:])
        if self.cuda:
            if self.bandwidth_gbs is None:
                self.bandwidth_gbs = _copy_bandwidth_gbs(self.dev)
            info["bandwidth_gbs"] = self.bandwidth_gbs
        self.infos[key] = info
        t.info = info
        return info

    def exchange(self, cmd):
        """Allocates (again) the buffer a runner writes outputs into; returns its spec for the runner."""
        self.close_exchange()
        total = max(self.infos[cmd["task_key"]]["total"], ALIGN)
        lay = self.infos[cmd["task_key"]]["layout"]
        if self.cuda and cmd.get("kind", "ipc") == "ipc":
            ptr, handle = exchange.ipc_alloc(total)
            self.buffer_spec = dict(kind="ipc", ptr=ptr, total=total)
            return dict(ok=True, spec=dict(kind="ipc", handle=handle, layout=lay))
        path = cmd["path"]
        with open(path, "wb") as f:
            f.truncate(total)
        self.buffer_spec = dict(kind="file", path=path, total=total)
        return dict(ok=True, spec=dict(kind="file", path=path, layout=lay))

    def inputs(self, cmd):
        """The buffer the gated calls' inputs are sealed into (gate_device.JudgeInputs.allocate), for the current task;
        returns its spec for the runner."""
        t = self.ensure(cmd)
        return dict(ok=True, spec=self.gate.allocate(task_io.make_inputs(t.mod, task_io.SEED, self.dev),
                                                     cmd.get("path")))

    def seal(self, cmd):
        """A gated call's inputs, made here from its seed, written into the buffer sealed with its key (gate.py)."""
        self.gate.seal(task_io.make_inputs(self.ensure(cmd).mod, cmd["seed"], self.dev), int(cmd["key"]))
        return dict(ok=True)

    def release(self, cmd):
        """Drops the current task and both buffers: another judge of this GPU is about to work (a judge keeps its last
        task's inputs, reference outputs and buffers for the next evaluation of it: ~24 GiB for a 6 GiB-input task,
        which two idle judges beside an evaluation made too much for an 80 GB GPU)."""
        had_task = self.task is not None
        self.task = None
        self.close_exchange()
        self.gate.release()
        if self.cuda:
            torch.cuda.empty_cache()
        return dict(ok=True, had_task=had_task)

    def close_exchange(self):
        if self.buffer_spec and self.buffer_spec["kind"] == "ipc":
            exchange.cudart().cudaFree(ctypes.c_void_p(self.buffer_spec["ptr"]))
        self.buffer_spec = None

    def poison_exchange(self):
        if self.buffer_spec["kind"] == "ipc":
            kernel_eval.poison_fill_ptr(self.buffer_spec["ptr"], self.buffer_spec["total"], self.dev)
            torch.cuda.current_stream(self.dev).synchronize()     # poisoned before the runner may write again
        else:
            with _regular_file(self.buffer_spec["path"], os.O_WRONLY) as f:
                f.write(b"\xff" * self.buffer_spec["total"])

    def read_exchange(self, lay):
        """The tensors a runner wrote, copied into judge-owned memory (then it may scribble on the buffer)."""
        raw = torch.empty(self.buffer_spec["total"], dtype=torch.uint8, device=self.dev)
        if self.buffer_spec["kind"] == "ipc":
            torch.cuda.synchronize()
            source, size = ctypes.c_void_p(self.buffer_spec["ptr"]), ctypes.c_size_t(self.buffer_spec["total"])
            exchange._ck(exchange.cudart().cudaMemcpy(ctypes.c_void_p(raw.data_ptr()), source, size, 3), "cudaMemcpy")
        else:
            with _regular_file(self.buffer_spec["path"], os.O_RDONLY) as f:
                data = bytearray(f.read(self.buffer_spec["total"]))
            raw.copy_(torch.frombuffer(data, dtype=torch.uint8) if data else raw)
        return [raw[off:off + n].view(getattr(torch, dt)).reshape(shape) for off, n, dt, shape in lay]

    def check(self, cmd):
        """Judges the output a runner delivered for `seed`: meta = what the runner says it returned, checksum = what
        it said it delivered. The buffer is copied first, before anything else, and poisoned again."""
        info = self.infos[cmd["task_key"]]
        try:
            outs = self.read_exchange(info["layout"])
            self.poison_exchange()
        except (OSError, ValueError) as e:                # the candidate replaced or removed the exchange file
            return dict(ok=True, verdict="changed", why=f"the judge's output buffer was tampered with: {e}")
        t = self.ensure(cmd)
        if cmd.get("checksum") is not None and exchange.checksum(outs) != cmd["checksum"]:
            return dict(ok=True, verdict="changed", why="the output in the judge's buffer differs from what the "
                                                         "candidate delivered when its call returned")
        outs = as_stored(outs, cmd.get("order"))       # the bytes are checked as delivered, then given their order
        if outs is None:
            return dict(ok=True, verdict="incorrect", why="the runner named an impossible memory order")
        inputs, ref = t.ref(cmd["seed"])
        want, got = task_io.meta(ref), cmd["meta"]
        problem = _structure_problem(got, want)
        if problem or cmd.get("checksum") is None:
            return dict(ok=True, verdict="incorrect", why=problem or "the output could not be delivered")
        p = info["precision"]
        r64, r64_error = None, None        # the float64 reference first, so that one pass per output does it all
        if "skipped" not in p:
            try:
                r64 = _floats(t.ref64(inputs))
            except Exception as e:
                r64_error = f"{type(e).__name__}: {e}"[:300]
        stats, it, floats = [0.0, 0.0, 0.0, 0.0], iter(outs), 0
        sums, mism64, paired = [0.0, 0.0, 0.0], 0, r64 is not None   # err_sq, ref_sq, ref_err_sq
        for w, g, r in zip(want, got, task_io.leaves(ref)):
            if w["kind"] == "tensor":
                o, x = next(it), None
                if getattr(torch, w["dtype"]).is_floating_point and r64 is not None:
                    x = r64[floats] if floats < len(r64) and _shape_ok(o, r64[floats]) else None
                    paired &= x is not None
                    floats += 1
                c = kernel_eval.compare(o, r, cmd["atol"], cmd["rtol"], ref64=x)
                if x is not None:
                    mism64 += c["mismatches_vs64"]
                    sums = [sums[0] + c["err_sq"], sums[1] + c["ref_sq"], sums[2] + c["ref_err_sq"]]
                s = [c["max_abs"], c["max_rel"], float(c["mismatches"]), float(c["nans"])]
            elif w["kind"] == "number":
                s = compare(torch.tensor(g["value"]), torch.tensor(w["value"]), cmd["atol"], cmd["rtol"])
            else:
                continue
            stats = [max(stats[0], s[0]), max(stats[1], s[1]), stats[2] + s[2], stats[3] + s[3]]
        paired = paired and floats == len(r64)
        res = dict(ok=True, verdict="correct" if stats[2] == 0 else "incorrect", stats=stats)
        if res["verdict"] == "incorrect" and stats[3] == 0 and "skipped" not in p and \
                all(w["kind"] == "tensor" and getattr(torch, w["dtype"]).is_floating_point for w in want):
            if r64_error:                  # isclose failed against the fp32 reference: is the reference the one off?
                res["fp32_reference_off"] = dict(skipped=r64_error)
            elif paired and mism64 == 0:
                res.update(verdict="correct", fp32_reference_off=dict(mismatches=stats[2], max_rel_err=stats[1]))
        if res["verdict"] == "correct" and "skipped" not in p:
            if r64_error or not paired:
                res["precision"] = dict(skipped=r64_error or "the float64 reference's floating outputs do not "
                                                             "match the output's in number or shape")
            else:
                ref_err = max(p["ref_err"], _ratio(sums[2], sums[1]) or 0.0)
                threshold = max(PREC_RATIO * ref_err, p["half_share"] * p["half_err"])
                err = _ratio(sums[0], sums[1])
                res["precision"] = dict(err=err, ref_err=ref_err, half_err=p["half_err"], threshold=threshold,
                                        downgrade=err is not None and err > threshold)
        return res


def as_stored(outs, order):
    """The logical tensors of outputs a runner delivered in memory order (exchange.dense_order: each leaf's dims from
    outermost to innermost, or None when delivered contiguous): a view of the raw bytes permuted back. None when an
    order is not a permutation of that leaf's dims. A false order only scrambles the candidate's own output."""
    if order is None:
        return outs
    if not isinstance(order, list) or len(order) != len(outs):
        return None
    res = []
    for x, o in zip(outs, order):
        if o is None:
            res.append(x)
            continue
        if not (isinstance(o, list) and sorted(o) == list(range(x.dim())) and all(type(d) is int for d in o)):
            return None
        inv = sorted(range(len(o)), key=o.__getitem__)
        res.append(x.reshape([x.shape[d] for d in o]).permute(inv))
    return res


def mismatches_vs64(out, ref, r64, atol, rtol):
    """Mismatches of out against the float64 truth, allowing each element the tolerance plus the fp32 reference's
    own error there: not (|o - r64| <= atol + rtol * |r64| + |r - r64|), NaN never matching (float64).
    Zero means the candidate is as close to the truth as the fp32 reference is, so isclose's mismatches against that
    reference are the reference's rounding, not the candidate's: CUDA-L1 level3/49 (Mamba2 final state, outputs
    ~5e7 after exp(cumsum)) missed rtol by 0.0012 at 1 element of 131072 in a timed call."""
    return float(kernel_eval.compare(out, ref, atol, rtol, ref64=r64.double())["mismatches_vs64"])


def _shape_ok(a, b):
    return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape


def _regular_file(path, flags):
    """The exchange file, opened without following a link and without blocking (a candidate may have replaced it
    with a link or a FIFO); anything but a regular file raises."""
    fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK)
    import stat
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ValueError(f"{path} is no longer a regular file")
    return os.fdopen(fd, "rb" if flags == os.O_RDONLY else "wb")


def _structure_problem(got, want):
    """Why the runner's output structure differs from the reference's (None if it does not)."""
    if not isinstance(got, list) or len(got) != len(want):
        return f"the output has {len(got) if isinstance(got, list) else '?'} parts, expected {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        where = f"output part {i}"
        if not isinstance(g, dict) or g.get("kind") != w["kind"]:
            got_kind = g.get('type') or g.get('kind') if isinstance(g, dict) else '?'
            return f"{where} is a {got_kind}, expected a {w['kind']}"
        if w["kind"] == "tensor":
            if g.get("shape") != w["shape"]:
                return f"{where} has shape {tuple(g.get('shape') or ())}, expected {tuple(w['shape'])}"
            if g.get("dtype") != w["dtype"]:
                return f"{where} has dtype {g.get('dtype')}, expected {w['dtype']} (REFERENCE.md §4c)"
        if w["kind"] == "number" and not isinstance(g.get("value"), (int, float)):
            return f"{where} is not a number"
    return None


def _copy_bandwidth_gbs(dev):
    """Device-to-device copy bandwidth in GB/s (read + write bytes / time), best of 4 copies of 256 MiB."""
    a = torch.empty(64 << 20, dtype=torch.float32, device=dev)
    b = torch.empty_like(a)
    best = float("inf")
    for _ in range(4):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        b.copy_(a)
        torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    return 2 * a.numel() * 4 / best / 1e9


TRIM = os.environ.get("CUDAL1_JUDGE_TRIM", "1") != "0"   # return cached GPU memory between commands (diag_clock.py)


def main(sock, spec):
    """Entry point of a forked judge: one reply per command (warm | setup | exchange | inputs | seal | check |
    release | exit)."""
    if spec["device"] == "cpu" and not os.environ.get("OMP_NUM_THREADS"):
        torch.set_num_threads(1)
    cores.pin(spec.get("cpus"))                              # the timing cores (cores.core_split): it works under
    dev = torch.device(spec["device"])                   # the GPU's lock, beside the timed runner
    if spec.get("kernel_eval"):                          # the evaluator's device code, by the parent's path and hash
        kernel_eval.load(spec["kernel_eval"])
    with contextlib.suppress(Exception):                 # no other process of this user may read our memory
        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)           # PR_SET_DUMPABLE 0
    judge = _Judge(dev)
    runner.send(sock, dict(op="hello", pid=os.getpid(), t=time.time()))
    while True:
        try:
            cmd = runner.recv(sock)
        except (EOFError, ValueError, OSError):
            return
        op = cmd.get("op")
        if op == "exit":
            return
        try:
            fn = dict(warm=judge.warm, setup=judge.setup, exchange=judge.exchange, check=judge.check,
                      inputs=judge.inputs, seal=judge.seal, release=judge.release)[op]
            reply = fn(cmd)
        except Exception as e:
            reply = dict(ok=False, **runner.describe(e))
        spare = torch.cuda.memory_reserved(dev) - torch.cuda.memory_allocated(dev) if judge.cuda else 0
        if TRIM and spare > 1 << 30:
            torch.cuda.empty_cache()     # the float64 references and checks of a 6 GB task leave tens of GB cached
        runner.send(sock, reply)              # here, which the candidate's process then could not allocate (H200 OOMs)
