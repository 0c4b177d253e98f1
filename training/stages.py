"""The stages a preset chains around rl.py: prepare.py and sft.py before RL, evaluate.py after it.

rl.py runs them as subprocesses with the settings they share (SHARED) and those of its command line that are the
stage's own and not rl.py's (prepare.py's variants_dir, sft.py's max_iters; rl.py's lr stays RL's); out_dir/chain.json
records which were started and which finished, so a rerun after an interrupt runs the cut one again, which continues
where it was.
load_tasks reads prepare.py's task set for rl.py."""
import os
import signal
import sys
import time

import common

CHAIN = ("prepare.py", "sft.py", "rl.py", "evaluate.py")  # the stages a preset chains, in this order
SHARED = ("--preset", "--gpu", "--out_dir", "--device", "--arch", "--gpu_name", "--build_workers", "--kernelbench_dir",
          "--download", "--seed")  # the settings a chained stage takes from rl.py's command line
STAGE_S = {}  # wall seconds of each stage this command ran, printed at the end
T0 = time.time()  # about this command's start (rl.py imports this early), for the wall time printed at the end


def chain_state(out_dir, script=None, state=None):
    """out_dir/chain.json, {script: "started" | "done"} for the stages this run chained; with script and state it
    is updated first. A stage left "started" was interrupted, and a rerun runs it again to continue."""
    path = os.path.join(out_dir, "chain.json")
    st = common.read_json(path) if os.path.exists(path) else {}
    if script:
        st[script] = state
        os.makedirs(out_dir, exist_ok=True)
        common.write_json_atomic(path, st)
    return st


def chained(g):
    """The stage scripts an rl.py run with settings `g` (its globals) runs besides itself."""
    return ((["prepare.py"] + ([] if g["policy"] else ["sft.py"]) if g["prepare_if_missing"] else [])
            + (["evaluate.py"] if g["run_evaluate"] else []))


def stage_args(script, argv):
    """The settings of rl.py's command line `argv` that go on to the stage `script`, each as --key=value: --preset,
    --gpu, and the stage's own settings (its config block), those rl.py has too only where SHARED."""
    def keys(name):
        return {key for _, settings in common.config_block(os.path.join(common.ROOT, name)) for key, _ in settings}
    theirs, mine = keys(script), keys("rl.py")
    return [f"--{key}={val}" for key, val in common.parse_pairs(argv)
            if key in ("preset", "gpu") or key in theirs and (f"--{key}" in SHARED or key not in mine)]


def run_stage(script, argv, out_dir, resume, extra=()):
    """Run another stage script as a subprocess with the settings it shares with rl.py (+ extra args), marked
    started and then done in chain.json. A Ctrl-C or SIGTERM goes on to the stage (common.run_script), which keeps
    what it measured or trained; this run then stops with exit status 130 and one line naming the stage and the
    command that continues. A stage that fails stops this run with exit status 1."""
    chain_state(out_dir, script, "started")
    t = time.time()
    rc, sig = run_script(script, stage_args(script, argv) + list(extra))
    if rc == 0:
        chain_state(out_dir, script, "done")
        STAGE_S[script] = time.time() - t
    if sig is None and rc == 0:
        return
    if sig is None and rc not in (130, -signal.SIGINT, -signal.SIGTERM):
        sys.exit(f"error: {script} failed (exit status {rc}; its message is above); fix that and run this command "
                 "again")
    # after RL has steps, only --resume=True continues this out_dir (a plain rerun refuses to mix two runs)
    again = " ".join(["python rl.py"] + argv + ([] if resume or script in CHAIN[:2] else ["--resume=True"]))
    print(f"interrupted {'after' if rc == 0 else 'during'} {script} (stage {CHAIN.index(script) + 1} of 4: prepare "
          f"-> sft -> rl -> evaluate); what it measured or trained is kept; continue with: {again}", flush=True)
    sys.exit(130)


def run_earlier(argv, out_dir, resume, policy):
    """prepare.py and sft.py where their outputs are missing or an interrupt left them unfinished (chain.json);
    sft.py not at all when rl.py was given a --policy. Then a line saying RL starts, as the other stages' do."""
    chain = chain_state(out_dir)
    if not os.path.exists(os.path.join(out_dir, "db.json")) or chain.get("prepare.py") == "started":
        run_stage("prepare.py", argv, out_dir, resume)
    elif chain.get("prepare.py") == "done":
        print(f"prepare.py: done earlier in {out_dir}, skipped", flush=True)
    if not policy and (not os.path.exists(os.path.join(out_dir, "sft", "config.json"))
                       or chain.get("sft.py") == "started"):
        run_stage("sft.py", argv, out_dir, resume, ["--resume=True"] if chain.get("sft.py") == "started" else [])
    elif not policy and chain.get("sft.py") == "done":
        print(f"sft.py: done earlier in {out_dir}/sft, skipped", flush=True)
    print("rl.py: RL, stage 3 of 4, in this process", flush=True)   # the chain's log names every stage


TORCHRUN_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
                "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID",
                "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_USE_AGENT_STORE",
                "TORCH_NCCL_ASYNC_ERROR_HANDLING")


def run_script(script, args):
    """Run another stage script of this repo as a plain single-process subprocess (torchrun's variables removed, so
    a stage started from one rank never tries to join that rank's process group) and wait for it.

    The stage runs in a session of its own, so a Ctrl-C in the terminal reaches only this process, which passes it
    on once (SIGINT), as it passes on a SIGTERM (what `kill` and `timeout` send to this process alone): the stage's
    own handler then saves what it has and exits. Returns (exit status, the signal passed on or
    None); the caller says what it means."""
    import signal
    import subprocess
    env = {k: v for k, v in os.environ.items() if k not in TORCHRUN_ENV}
    env["CUDAL1_CHAINED"] = "1"      # the stage's own "continue with ..." hint would contradict the chain's
    print(f"$ python {script} {' '.join(args)}", flush=True)
    got, proc = [], []

    def forward(sig, frame):
        got.append(sig)
        if proc and proc[0].poll() is None:
            proc[0].send_signal(sig)
    # installed before the stage starts: it then inherits the default SIGINT action even where this process was
    # started with SIGINT ignored (a shell's background job), and a signal during its start is not lost
    old = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        proc.append(subprocess.Popen([sys.executable, os.path.join(common.ROOT, script)] + list(args), env=env,
                                     start_new_session=True))
        if got:
            proc[0].send_signal(got[0])
        rc = proc[0].wait()
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        if proc and proc[0].poll() is None:  # this process is failing: do not leave the stage running on its own
            proc[0].kill()
    return rc, (got[0] if got else None)


def finish_step_on_interrupt(describe, master):
    """For a training loop: Ctrl-C (SIGINT) or SIGTERM (what torchrun sends its ranks on Ctrl-C) lets the loop finish
    its step, save and exit, so the checkpoint is at a step boundary and --resume continues exactly; a second Ctrl-C
    raises KeyboardInterrupt at once. describe(): the line printed at the first signal when master (rank 0).
    Returns (stop, restore): the signals received so far (the loop polls the list at the end of each step), and a
    function that puts the previous handlers back."""
    stop = []

    def on_signal(sig, frame):
        if sig == signal.SIGINT and signal.SIGINT in stop:
            raise KeyboardInterrupt
        if not stop and master:
            print(describe(), flush=True)
        stop.append(sig)
    handlers = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}

    def restore():
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    return stop, restore


def print_wall_time():
    """One line with each stage's wall seconds, when this command ran more than RL."""
    if len(STAGE_S) > 1:
        print("wall time: " + ", ".join(f"{k[:-3]} {v:.0f} s" for k, v in STAGE_S.items())
              + f"; this command {time.time() - T0:.0f} s", flush=True)


def load_tasks(out_dir, split, train_degenerate, master):
    """prepare.py's task set: ({name: task}, the sorted names RL trains on: those of `split`, without the tasks
    prepare.py's screen found degenerate unless train_degenerate). Exits with one line when there are none."""
    path = os.path.join(out_dir, "tasks.jsonl")
    if not os.path.exists(path):
        sys.exit(f"error: no task set {path}: run prepare.py first (or give --out_dir)")
    tasks = {t["name"]: t for t in common.read_jsonl(path)}
    train_tasks = sorted(n for n, t in tasks.items() if split == "all" or t["split"] == split)
    # a task whose check a trivial output passes (zeros, a constant, the input) rewards a kernel for doing nothing
    degenerate = [n for n in train_tasks if tasks[n].get("degenerate")]
    if degenerate and not train_degenerate:
        train_tasks = [n for n in train_tasks if n not in degenerate]
        if master:
            print(f"not training on {len(degenerate)} degenerate tasks (prepare.py's screen; --train_degenerate=True "
                  f"to include them): {', '.join(degenerate[:8])}{' ...' if len(degenerate) > 8 else ''}")
    if not train_tasks:
        sys.exit(f"error: no tasks with split={split!r} in {path}" + (
            f" that are not degenerate ({len(degenerate)} are; --train_degenerate=True to use them)"
            if degenerate else ""))
    return tasks, train_tasks
