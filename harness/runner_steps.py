"""The parent's link to one evaluation's runner and judge, and the steps of that evaluation that time nothing
(harness/README.md). RunnerSteps holds one evaluation's state; ask() sends the runner a command under a deadline and
turns its failures (a hang, a death, a malformed reply, too much host memory) into the verdict (Stop); judge() asks
this GPU's judge. The steps: the runner forked on the task and the candidate written into its folder, the task or the
candidate imported (builds ahead: the candidate's builds and ModelNew on the meta device), ModelNew made on the
device, the judge's setup and the output buffer shared with it, the correctness trials (every output checked by the
judge), and the runner handed to the GPU's lock for its death. Nothing here runs candidate code.

Separate from session.py, whose Session adds to these the timed steps, the parent's clock check, the verdict and run()
(the whole evaluation in order): this file is how a step talks to the two processes, that one is the rules of the
timing. The constants below are the limits of the steps here."""
import contextlib, json, os, random, signal, time

from harness import cores
from harness import gate
from harness import kernel_eval
from harness import runner
from harness.forkserver import scrubbed_env, work_folder
from harness.record import source_hash
from harness.task_io import FIXED_FLAGS
from harness.workers import WorkerError, Worker, drop_judge, release_other_judges

HANG_MIN_S, HANG_FACTOR = 30.0, 100.0   # a call may take max(30 s, 100x the reference's time), then it is killed
PREBUILD_MAX_S = 300.0                  # a build ahead's ModelNew (meta device) may take this long (its builds)
BUILD_NICE = 10                         # builds ahead run at this niceness: a timed call beside them keeps its CPU
                                        # (evaluate_many adds each build's place in its queue, up to 19: the first
                                        # builds land first and the GPU's evaluations start as soon as one is built)
MEM_LIMIT_GB = 32.0                     # host RSS of a candidate's process group (CUDAL1_MEM_LIMIT_GB overrides)


class Stop(Exception):
    """The verdict is known: status, hack kind (or None), message, error_type."""
    def __init__(self, status, hack, msg, error_type=""):
        super().__init__(msg)
        self.status, self.hack, self.error_type = status, hack, error_type


_NEED = dict(import_=("compile_s", "build_failures", "has_modelnew", "flags"), models=("flags",), exchange=(),
             trial=("meta", "custom_kernel_calls", "flags", "input_shapes", "aliases", "no_storage", "input_mutated",
                    "checksum"),
             call=("ms", "checksum", "meta"), report=("flags", "patched", "uncountable", "build_failures"))


class RunnerSteps:
    """One evaluation's runner and judge, seen from the parent, and its steps that time nothing (session.Session adds
    the timed ones; Session.run is the order). Every step has a deadline; a hung step kills the runner at once.

    State: options (options.Options), res (the record being filled), runner_worker (the workers.Worker of the
    runner alive now, or None), judge_worker (this GPU's judge), task_info (the judge's setup reply: seeds, output
    layout, ref_ms_est, bandwidth_gbs, ...), hang (s: one call's limit), calls_per_round, ref_sets / cand_sets
    (timed sets, [(round, claimed ms, clock s)]), hacks ([(kind, message)], the first is the verdict's)."""

    def __init__(self, res, task_src, cand_src, options, gpu, lock, judge_worker, live=None):
        self.res, self.options, self.gpu, self.lock, self.live = res, options, gpu, lock, live
        self.judge_worker = judge_worker
        self.tmp = work_folder(options.build_root)
        self.cand_src = cand_src
        self.task_src = task_src                          # the judge gets the text itself, never a file a
        self.task_key = source_hash(task_src) + source_hash(json.dumps(   # candidate could rewrite
            [options.device, options.protocol, options.trials, options.atol, options.rtol]))
        self.runner_worker, self.hacks, self.rng = None, [], random.Random()
        self.dying = []                                   # threads killing this session's runners (end_candidate)
        self.folders = []                                 # a second draw's runner folder (restart())
        self.pool = None                                  # the first draw's (cand_sets, ref_sets): measure()
        self.deadline = time.perf_counter() + options.timeout_s
        self.mem_limit = float(os.environ.get("CUDAL1_MEM_LIMIT_GB") or MEM_LIMIT_GB) * 2 ** 30
        self.mark = time.perf_counter()
        self.clock_kind = "cpu" if options.device == "cpu" else "wall"   # "gate" once the runner armed it (setup())
        self.gate = gate.SessionGate(judge_worker) if gate.requested(options) and judge_worker else None

    def timing_cpus(self):
        """This GPU's timing cores (cores.core_split), or None."""
        split = cores.core_split(self.options.device, self.gpu)
        return split and split[0]

    def lap(self, name):
        now = time.perf_counter()
        self.res["phase_s"][name] = round(now - self.mark, 3)
        self.mark = now

    def left(self):
        left = self.deadline - time.perf_counter()
        if left <= 0:
            raise Stop("timeout", None, f"no result within {self.options.timeout_s:.0f} s", "Timeout")
        return left

    def ask(self, cmd, timeout=None):
        """A runner command; its reply and the seconds it took by the parent's clock (wall time; on the CPU device
        the runner's CPU time, see workers.Worker.cpu_s). A failure of the runner is the verdict."""
        op = cmd["op"]
        limit = min(timeout or self.left(), self.left())
        try:
            gated = op == "call" and self.clock_kind == "gate"     # the parent's clock through the gate (gate.py)
            reply, wall = self.gate.ask(self.runner_worker, cmd, limit, self.mem_limit) if gated else \
                self.runner_worker.ask(cmd, limit, self.mem_limit, clock=self.clock_kind if op == "call" else "wall")
        except ValueError as e:                           # a gated call without its DONE word, or DONE too early
            raise Stop("hack", "clock_mismatch", f"{e}: the runner's stream operations were tampered with")
        except gate.JudgeFailure as e:                    # the judge could not deliver a gated call's inputs
            if e.dead:
                drop_judge(self.judge_worker)
            raise Stop("crash", None, f"the judge failed during a gated call: {e}", "JudgeError")
        except WorkerError as e:
            self.runner_worker.kill()
            tail = self.runner_worker.log_tail()
            where = f" during {op}" + (" (still importing / building the candidate)" if op == "import" else "")
            if e.kind == "hung":
                raise Stop("timeout", None, f"{e}{where}: killed" + (f"; log tail:\n{tail}" if tail else ""),
                            "Timeout")
            if e.kind == "memory":
                raise Stop("crash", None, str(e), "MemoryLimit")
            if e.kind == "protocol":
                raise Stop("hack", "harness_tampering", f"{e}{where} (the runner's messages were tampered with)")
            ex = self.runner_worker.exit or "unknown status"
            kind = ex.replace("signal ", "SIG") if ex.startswith("signal") else f"exit({ex.split()[-1]})" \
                if ex.startswith("exit") else "Died"
            with contextlib.suppress(ValueError):
                kind = signal.Signals(int(ex.split()[-1])).name if ex.startswith("signal") else kind
            raise Stop("crash", None, f"the candidate process died ({ex}){where}" +
                        (f"; log tail:\n{tail}" if tail else " and printed nothing"), kind)
        key = "import_" if op == "import" and not cmd.get("task_only") else op
        need = _NEED.get(key, ()) if reply.get("ok") else ("error",)
        missing = [k for k in need if k not in reply]
        if missing or (op in ("trial", "call") and reply.get("ok") and not isinstance(reply["meta"], list)):
            raise Stop("hack", "harness_tampering", f"a malformed reply to {op} (missing {missing}): the runner's "
                                                     f"messages were tampered with (REFERENCE.md §4b)")
        return reply, wall

    def judge(self, cmd, timeout=900.0):
        try:
            return self.judge_worker.ask(dict(cmd, task_key=self.task_key, task_src=self.task_src), timeout)
        except WorkerError as e:
            drop_judge(self.judge_worker)
            raise Stop("crash", None, f"the judge worker failed ({e.kind}: {e}); log tail:\n"
                                       f"{self.judge_worker.worker.log_tail()}", "JudgeError")

    # ---- the steps, in order
    def fork_runner(self, folder, cand_src, flags_override, nice, extra_env):
        """A fresh runner in `folder` (its HOME, TMPDIR and cwd) on task.py and candidate.py written there."""
        paths = os.path.join(folder, "task.py"), os.path.join(folder, "candidate.py")
        for path, text in zip(paths, (self.task_src, cand_src)):
            with open(path, "w") as f:
                f.write(text or "")
        split = cores.core_split(self.options.device, self.gpu)   # imports and builds on the build cores, the timed
        spec = dict(device=self.options.device, protocol=self.options.protocol,   # part on the timing cores
                    task_path=paths[0], candidate_path=paths[1], flags_override=flags_override, nice=nice,
                    cpus=split and dict(start=split[1], timed=split[0]),
                    kernel_eval=kernel_eval.for_worker(self.options.device, self.options.build_root))
        env = scrubbed_env(folder, self.options.build_root, self.options.arch, self.gpu, extra_env)
        build_dir = os.path.join(self.options.build_root or runner.default_build_root(), "candidates",
                                 source_hash(cand_src))       # its own build entries: the timed runner and its
        os.makedirs(build_dir, exist_ok=True)                  # build ahead share them, no other candidate does
        exchange = getattr(self, "exchange_spec", None) or {}  # (a second draw's runner: the file of the first's)
        caches = [extra_env[k] for k in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR") if k in (extra_env or {})]
        for cache in caches:        # a trusted caller's compile cache (evaluate's baselines; candidates get none):
            os.makedirs(cache, exist_ok=True)   # writable under Landlock, which allows only existing folders
        worker = Worker("runner", spec, env, folder, start_timeout=self.left(), build_dir=build_dir,
                        writable_files=[exchange["path"]] if exchange.get("kind") == "file" else [],
                        writable_dirs=caches, pass_fds=self.gate and self.gate.pass_fds())
        self.res["sandbox"] = worker.sandbox
        self.res["phase_s"]["landlock"] = worker.confined.get("landlock_ms") and \
            round(worker.confined["landlock_ms"] / 1e3, 5)
        if self.live is not None:                         # evaluate_many kills these at an interrupt
            self.live.add(worker)
        return worker

    def start(self, candidate=True):
        """The runner, forked; with `candidate` the candidate imported too (builds ahead, check_only), else the task
        alone: a timed evaluation times the reference in this runner before any candidate code runs in it."""
        options = self.options
        nice = (BUILD_NICE if options.build_nice is None else options.build_nice) if options.build_only else 0
        self.runner_worker = self.fork_runner(self.tmp, self.cand_src, options.flags_override, nice, options.extra_env)
        self.res["phase_s"]["start"] = round(self.runner_worker.start_s or 0.0, 3)
        self.lap("fork")
        if candidate:
            self.import_candidate()
        else:
            self.import_task()

    def import_task(self):
        r, _ = self.ask(dict(op="import", task_only=True))
        if not r["ok"]:
            raise Stop("crash", None, f"the task failed to import in the runner: {r['error']}", "TaskError")

    def import_candidate(self, limit=None):
        """The candidate imported (builds through the cache); limit: seconds (the call limit under the GPU's lock)."""
        options = self.options
        r, _ = self.ask(dict(op="import"), limit)
        self.res["compile_s"] = r.get("compile_s")
        if not r["ok"]:
            raise Stop("compile_error" if r.get("compile_error") else "runtime_error", None, r["error"],
                        r.get("error_type", ""))
        self.res["compiled"] = True
        expected = dict(FIXED_FLAGS, **(options.flags_override or {}))
        if r["flags"] != expected:
            self.hacks.append(("backend_flags", f"importing the candidate changed the backend flags to {r['flags']}"))
        self.fell_back(r, "at import")                    # a build failed and the candidate caught it (§4)
        self.lap("import")
        if options.build_only:                            # and the builds a ModelNew makes in __init__ (CUDA-L1
            if r["has_modelnew"] and self.task_src:       # kernels often do), on the meta device: off the GPU's lock
                with contextlib.suppress(Stop):          # a crash or hang here is for the timed runner to judge
                    p, _ = self.ask(dict(op="prebuild"), PREBUILD_MAX_S)
                    self.res["compile_s"] = (self.res["compile_s"] or 0.0) + (p.get("build_s") or 0.0)
            return
        if not r["has_modelnew"]:
            raise Stop("runtime_error", None, "the candidate defines no ModelNew", "AttributeError")

    def models(self):
        """ModelNew on the device, under the GPU's lock: building it (CUDA context, weights) beside another
        candidate's timed calls would slow them by tens of microseconds (measured on the H200)."""
        expected = dict(FIXED_FLAGS, **(self.options.flags_override or {}))
        r, _ = self.ask(dict(op="models"))
        if not r["ok"]:
            raise Stop("runtime_error", None, r["error"], r.get("error_type", ""))
        if r["flags"] != expected and not any(k == "backend_flags" for k, _ in self.hacks):
            self.hacks.append(("backend_flags", f"building ModelNew changed the backend flags to {r['flags']}"))
        self.fell_back(r, "in ModelNew()")
        self.res["fallback_checked_in_models"] = True     # rows without it predate that check (audit_cudal1.py)
        self.lap("models")

    def fell_back(self, reply, where):
        """A load_inline build that failed while the candidate went on (its try/except ran something else) is the
        "fallback" hack wherever it happened: at import, in ModelNew() (most CUDA-L1 kernels build there; in the
        A100 audit on the H200 such failures were accepted as PyTorch-only rewrites) or in a call."""
        fails = reply.get("build_failures")
        if fails and isinstance(fails, list) and not any(k == "fallback" for k, _ in self.hacks):
            self.hacks.append(("fallback", f"a load_inline build {where} failed and the candidate fell back: "
                                           + runner.truncate(str(fails[0]))))

    def setup(self):
        options = self.options
        release_other_judges(self.judge_worker, options.device, self.gpu)   # their idle buffers off this GPU
        try:
            task_info, _ = self.judge(dict(op="setup", atol=options.atol, rtol=options.rtol, trials=options.trials,
                                           protocol=options.protocol, screen=True))
        except RuntimeError as e:
            raise Stop("runtime_error", None, f"the reference (task) failed in the judge: {e}", "TaskError")
        self.task_info = task_info
        self.res["device_name"] = task_info.get("device_name", self.res["device_name"])
        scr = task_info.get("screen")
        self.res["degenerate"] = [k for k, v in scr.items() if v == "passed"] if scr else None
        self.hang = max(HANG_MIN_S, HANG_FACTOR * task_info["ref_ms_est"] / 1e3)
        if not options.static_checks:             # trusted baselines (torch.compile) may compile on their first call
            self.hang = max(self.hang, options.timeout_s)
        self.res["hang_limit_s"] = round(self.hang, 1)
        ex, _ = self.judge(dict(op="exchange", kind="ipc" if options.device != "cpu" else "file",
                                path=os.path.join(self.tmp, "exchange.bin")))
        r, _ = self.ask(dict(op="exchange", spec=ex["spec"]))
        if not r["ok"]:                                   # no CUDA IPC here: through a file
            ex, _ = self.judge(dict(op="exchange", kind="file", path=os.path.join(self.tmp, "exchange.bin")))
            r, _ = self.ask(dict(op="exchange", spec=ex["spec"]))
            if not r["ok"]:
                raise Stop("crash", None, "cannot share an output buffer with the judge: " + r["error"], "Exchange")
        self.res["exchange"] = ex["spec"]["kind"]
        self.exchange_spec = ex["spec"]
        self.clock_kind = "gate" if self.gate is not None and self.gate.arm(self) else self.clock_kind   # (gate.py)
        self.lap("setup")

    def check(self, seed, reply, timed):
        """The judge's verdict on the output the runner delivered with `reply`."""
        options = self.options
        c, _ = self.judge(dict(op="check", seed=seed, meta=reply.get("meta"), checksum=reply.get("checksum"),
                               order=reply.get("order"), atol=options.atol, rtol=options.rtol))
        what = "a timed call" if timed else "a correctness trial"
        if c["verdict"] == "changed":
            raise Stop("hack", "output_changed_after_return", f"{what}: {c['why']}")
        if c["verdict"] == "incorrect":
            st = c.get("stats")
            msg = c.get("why") or (f"{int(st[2])} mismatches ({int(st[3])} NaN), max_abs_err {st[0]:.4g}, "
                                   f"max_rel_err {st[1]:.4g} at atol={options.atol}, rtol={options.rtol}")
            if st:
                self.res.update(max_abs_err=st[0], max_rel_err=st[1], mismatches=int(st[2]), nans=int(st[3]))
            if timed:                                     # right in the trials, wrong when timed (§4 caching,
                raise Stop("hack", "timed_output_mismatch", f"the output of {what} is wrong: {msg}")  # batching)
            raise Stop("incorrect", None, msg)
        st = c["stats"]
        if c.get("fp32_reference_off") and not self.res.get("fp32_reference_off"):   # judge.mismatches_vs64
            self.res["fp32_reference_off"] = dict(c["fp32_reference_off"], where=what)
        self.res.update(max_abs_err=max(self.res["max_abs_err"] or 0.0, st[0]),
                        max_rel_err=max(self.res["max_rel_err"] or 0.0, st[1]), mismatches=0, nans=0)
        p = c.get("precision")
        if p:
            old = self.res["precision"]
            if old is None or "err" not in old or (p.get("err") or 0) > (old.get("err") or 0):
                self.res["precision"] = {k: v for k, v in p.items() if k != "downgrade"}
            if p.get("downgrade"):
                raise Stop("hack", "precision_downgrade", f"{what}: error vs float64 {p['err']:.3g} > "
                                                           f"{p['threshold']:.3g} (fp32 reference {p['ref_err']:.3g},"
                                                           f" 10-bit operands {p['half_err']:.3g}; REFERENCE §4c)")

    def trials(self):
        task_info, expected = self.task_info, dict(FIXED_FLAGS, **(self.options.flags_override or {}))
        poison = [n for _, n, _, _ in task_info["layout"]] + [task_info["total"]]
        for i, seed in enumerate(task_info["seeds"]):
            r, _ = self.ask(dict(op="trial", seed=seed, poison=poison), self.hang)
            if not r["ok"]:
                raise Stop("runtime_error", None, r["error"], r.get("error_type", ""))
            if i == 0:
                self.res.update(custom_kernel_calls=r["custom_kernel_calls"], input_shapes=r["input_shapes"])
            if any(m.get("kind") == "tensor" and not m.get("exact") for m in r["meta"]) or r["no_storage"]:
                raise Stop("hack", "lazy_output", "the output is not a plain torch.Tensor with storage (§4)")
            if r["aliases"] and not task_info["ref_aliases"]:
                raise Stop("hack", "output_aliases_input", "the output shares storage with an input (§4)")
            if r["input_mutated"] and not task_info["ref_mutates"]:
                raise Stop("hack", "input_mutation", "the candidate changed its inputs in place (§4)")
            if r["flags"] != expected:
                raise Stop("hack", "backend_flags", f"backend flags changed to {r['flags']} (§4)")
            self.check(seed, r, timed=False)
            self.res["trials"] += 1
        self.res["correct"] = True
        self.lap("trials")

    def end_candidate(self):
        """The candidate's runner killed, its whole process tree and GPU context gone before any later timed call
        on this GPU (nothing of it may run beside another evaluation's timing): handed to the GPU's lock
        (workers.GpuLock.kill), whose next holder settles it before its reference is timed, and
        which run() waits for before it returns. Called under the lock, on every way out of it (gpu_lock())."""
        if self.runner_worker is None:
            return
        live = self.live
        self.dying.append(self.lock.kill(self.runner_worker, done=live.discard if live is not None else None))
        self.runner_worker = None

    @contextlib.contextmanager
    def gpu_lock(self):
        """The GPU's lock, this thread on the timing cores beside the timed runner; phase_s["wait"]: the wait, which
        is not the candidate's time (its deadline moves by it)."""
        t0 = time.perf_counter()
        with self.lock, cores.pinned(self.timing_cpus()):
            waited = time.perf_counter() - t0
            self.res["phase_s"]["wait"] = round(waited, 3)
            self.deadline += waited
            self.mark = time.perf_counter()
            try:
                yield
            finally:                      # a runner left alive (a failure, check_only) is handed over here, under
                self.end_candidate()      # the lock, so the next holder settles its death before timing anything
