"""The stages around rl.py: the ones a preset chains (prepare.py and sft.py before RL, evaluate.py after it, issue 14
items 2-3) and what rl.py reads of the earlier ones (the exemplar database and result cache, CUDA-L1 §3).

rl.py runs the chained stages as subprocesses with the settings they share; out_dir/chain.json records which were
started and which finished, so a rerun after an interrupt runs the cut one again, which continues where it was."""
import hashlib
import os
import signal
import sys
import time

import common

CHAIN = ("prepare.py", "sft.py", "rl.py", "evaluate.py")  # the stages a preset chains, in this order
SHARED = ("--preset", "--gpu", "--out_dir", "--device", "--arch", "--gpu_name", "--build_workers", "--kernelbench_dir",
          "--download", "--seed")  # the settings a chained stage takes from rl.py's command line
STAGE_S = {}  # wall seconds of each stage this command ran (issue 12 item 5: printed at the end)
T0 = time.time()  # about this command's start (rl.py imports this early), for the wall time printed at the end


def sha(*parts):
    """The result cache's key of a kernel: 16 hex digits of sha256 over (task, code)."""
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


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


def run_stage(script, argv, out_dir, resume, extra=()):
    """Run another stage script as a subprocess with the settings it shares with rl.py (+ extra args), marked
    started and then done in chain.json. A Ctrl-C or SIGTERM goes on to the stage (common.run_script), which keeps
    what it measured or trained; this run then stops with exit status 130 and one line naming the stage and the
    command that continues (issue 14 item 3). A stage that fails stops this run with exit status 1."""
    chain_state(out_dir, script, "started")
    t = time.time()
    rc, sig = common.run_script(script, [a for a in argv if a.split("=")[0] in SHARED] + list(extra))
    if rc == 0:
        chain_state(out_dir, script, "done")
        STAGE_S[script] = time.time() - t
    if sig is None and rc == 0:
        return
    if sig is None and rc not in (130, -signal.SIGINT, -signal.SIGTERM):
        sys.exit(f"error: {script} failed (exit status {rc}; its message is above); fix that and run this command again")
    # after RL has steps, only --resume=True continues this out_dir (a plain rerun refuses to mix two runs)
    again = " ".join(["python rl.py"] + argv + ([] if resume or script in CHAIN[:2] else ["--resume=True"]))
    print(f"interrupted {'after' if rc == 0 else 'during'} {script} (stage {CHAIN.index(script) + 1} of 4: prepare "
          f"-> sft -> rl -> evaluate); what it measured or trained is kept; continue with: {again}", flush=True)
    sys.exit(130)


def run_earlier(argv, out_dir, resume, policy):
    """prepare.py and sft.py where their outputs are missing or an interrupt left them unfinished (chain.json);
    sft.py not at all when rl.py was given a --policy."""
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


def print_wall_time():
    """One line with each stage's wall seconds, when this command ran more than RL."""
    if len(STAGE_S) > 1:
        print("wall time: " + ", ".join(f"{k[:-3]} {v:.0f} s" for k, v in STAGE_S.items())
              + f"; this command {time.time() - T0:.0f} s", flush=True)


def load_database(out_dir, task_names):
    """The cold-start exemplar database and result cache from what the earlier stages measured.

    Database: {task: [{code, speedup (x), step, source}]} of every *successful* kernel: out_dir/db.json (written by
    prepare.py) and the correct rows of out_dir/seed.jsonl (prepare's measured seed kernels, plus any imported
    collection such as CUDA-L1's release, same row format: task, code, correct, speedup, result, variant/source),
    each kernel once; step = -1 for all of them (before RL). Cache: {sha(task, code): bench result} of every seed
    row, so RL never re-times a kernel prepare.py already measured on this GPU. CUDA-L1 §3; issue 4 item 2.
    """
    db, cache = {n: [] for n in task_names}, {}

    def add(task, code, speedup, step, source):
        if task in db and speedup is not None and all(e["code"] != code for e in db[task]):
            db[task].append(dict(code=code, speedup=speedup, step=step, source=source))
    if os.path.exists(os.path.join(out_dir, "db.json")):
        for task, entries in common.json.load(open(os.path.join(out_dir, "db.json"))).items():
            for e in entries:
                add(task, e["code"], e["speedup"], e.get("step", -1), e.get("source", "db.json"))
    if os.path.exists(os.path.join(out_dir, "seed.jsonl")):
        for r in common.read_jsonl(os.path.join(out_dir, "seed.jsonl")):
            cache[sha(r["task"], r["code"])] = r["result"]
            if r.get("correct"):
                add(r["task"], r["code"], r.get("speedup") or r["result"].get("speedup"), -1,
                    r.get("source") or f"variant:{r.get('variant', '?')}")
    return db, cache
