"""Interrupts lose nothing: Ctrl-C (SIGINT to the terminal's process group) or SIGTERM (to the
one process, as `kill` and `timeout` send it) at any point of the chain prepare -> sft -> rl -> evaluate that
`python rl.py --preset=...` runs: the line printed names the stage that was running, what the stage had measured or
trained is kept, and the rerun it names continues. Real subprocesses on a one-task CPU setup (config/tiny_cpu.py cut
down); the evaluator's own resume on a kernels file; training.stages.run_script's passing on of a signal, without
torch."""
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(ROOT, "tests", "fixtures")


def start(args, tmp, log):
    """A stage script in a session of its own (as a terminal runs a command), output into the file `log`."""
    env = dict(os.environ, CUDAL1_BUILD_ROOT=str(tmp / "build"), PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
    return subprocess.Popen([sys.executable, *args], cwd=ROOT, env=env, stdout=open(log, "w"),
                            stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=default_sigint)


def default_sigint():
    """Ctrl-C's default action in the started process even when this test runs where SIGINT is ignored (a shell's
    background job: `pytest &`), which a child would otherwise inherit."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def wait_for(p, ready, what, timeout=900):
    """Poll until ready() is true (the process must still be running then)."""
    deadline = time.time() + timeout
    while not ready():
        assert p.poll() is None, f"ended (exit status {p.returncode}) before {what}"
        assert time.time() < deadline, f"no {what} within {timeout} s"
        time.sleep(0.2)


def lines(path):
    return [json.loads(x) for x in open(path) if x.strip()] if os.path.exists(path) else []


def interrupt(p, sig, log):
    """Ctrl-C: SIGINT to the process group (what a terminal does); SIGTERM: to the process alone. -> its output."""
    os.killpg(p.pid, sig) if sig == signal.SIGINT else p.send_signal(sig)
    p.wait(timeout=600)
    out = open(log).read()
    assert p.returncode == 130, (p.returncode, out[-4000:])
    assert "Traceback" not in out, out[-4000:]
    return out


def test_ctrl_c_inside_a_destructor_still_ends_the_script(tmp_path):
    """A Ctrl-C that lands in a __del__ (the GC runs them anywhere), which Python prints as "Exception ignored" and
    drops, still ends a stage script with its one line and status 130 (common.exit_on_interrupt sends it again)."""
    child = tmp_path / "child.py"
    child.write_text(textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {ROOT!r})
        import common
        common.exit_on_interrupt()

        class Slow:
            def __del__(self):
                print("in __del__", flush=True)
                time.sleep(5)

        obj = Slow()
        del obj
        time.sleep(5)
        print("not interrupted", flush=True)
    """))
    log = tmp_path / "child.log"
    p = start([str(child)], tmp_path, log)
    wait_for(p, lambda: "in __del__" in open(log).read(), "the destructor", timeout=60)
    out = interrupt(p, signal.SIGINT, log)
    assert "not interrupted" not in out and "Exception ignored" not in out and "interrupted (Ctrl-C)" in out, out


def test_run_script_passes_a_signal_on_once(tmp_path):
    """Ctrl-C in a terminal reaches the chaining process only (each stage runs in a session of its own); it passes
    the signal on exactly once, and passes on a SIGTERM sent to it alone, then says which signal it passed on."""
    child = tmp_path / "child.py"
    child.write_text(textwrap.dedent("""
        import signal, sys, time
        got = []
        signal.signal(signal.SIGINT, lambda s, f: got.append("INT"))
        signal.signal(signal.SIGTERM, lambda s, f: got.append("TERM"))
        print("ready", flush=True)
        t = time.time() + 30
        while not got and time.time() < t:
            time.sleep(0.05)
        time.sleep(1.0)  # a second signal would arrive now
        print("got", ",".join(got), flush=True)
        sys.exit(130)
    """))
    parent = f"from training import stages\nprint('returned', stages.run_script({str(child)!r}, []), flush=True)\n"
    for sig in (signal.SIGINT, signal.SIGTERM):
        log = tmp_path / f"{sig.name}.log"
        p = subprocess.Popen([sys.executable, "-c", parent], cwd=ROOT, stdout=open(log, "w"), stderr=subprocess.STDOUT,
                             start_new_session=True, env=dict(os.environ, PYTHONPATH=ROOT, PYTHONUNBUFFERED="1"),
                             preexec_fn=default_sigint)
        wait_for(p, lambda: "ready" in open(log).read(), "the child's start", 120)
        os.killpg(p.pid, sig) if sig == signal.SIGINT else p.send_signal(sig)
        p.wait(timeout=60)
        out = open(log).read()
        assert f"got {sig.name[3:]}\n" in out and f"returned (130, {int(sig)})" in out, out


def test_evaluate_keeps_every_measured_kernel(tmp_path):
    """evaluate.py stopped (Ctrl-C) while it measures a kernels file: the kernels measured so far are in
    kernels.jsonl and the rerun measures only the others."""
    src = json.loads(open(os.path.join(FIX, "eval_kernels.jsonl")).readline())
    kern = tmp_path / "k.jsonl"  # 3 distinct sources of one kernel: 3 measurements of one task
    kern.write_text("".join(json.dumps(dict(src, code=src["code"] + f"# variant {i}\n")) + "\n" for i in range(3)))
    args = ["evaluate.py", f"--kernels={kern}", f"--tasks_file={FIX}/eval_tasks.jsonl", "--device=cpu",
            "--baselines=eager", f"--eval_dir={tmp_path}/e", f"--task_names={src['task']}", "--time_budget_s=1.0",
            "--num_correct_trials=1", "--timeout_s=120"]
    p = start(args, tmp_path, tmp_path / "1.log")
    wait_for(p, lambda: len(lines(tmp_path / "e" / "kernels.jsonl")) >= 1, "a measured kernel")
    out = interrupt(p, signal.SIGINT, tmp_path / "1.log")
    assert "evaluate.py interrupted (Ctrl-C): every row measured so far is kept" in out
    kept = len(lines(tmp_path / "e" / "kernels.jsonl"))
    assert 1 <= kept <= 3 and "Measured 0 of 1 selected tasks" in out  # the task waits for all 3 of its kernels
    p = start(args, tmp_path, tmp_path / "2.log")
    assert p.wait(timeout=600) == 0, open(tmp_path / "2.log").read()[-3000:]
    out = open(tmp_path / "2.log").read()
    assert (f"{kept} kernels measured by an earlier run are reused" in out) or kept == 3, out[-3000:]
    assert len(lines(tmp_path / "e" / "kernels.jsonl")) == 3  # none measured twice
    row = next(r for r in lines(tmp_path / "e" / "results.jsonl") if r["method"] == "kernels")
    assert row["num_samples"] == 3 and row["success"], row


def micro_preset(tmp):
    """config/tiny_cpu.py on one task with its 6 kernels, a short SFT, 1 x 3 samples per RL step."""
    (tmp / "tasks").mkdir()
    shutil.copy(os.path.join(ROOT, "data", "tiny_cpu", "tasks", "swish.py"), tmp / "tasks")
    shutil.copytree(os.path.join(ROOT, "data", "tiny_cpu", "swish"), tmp / "variants" / "swish")
    path = tmp / "micro.py"
    path.write_text(textwrap.dedent(f"""
        import os as _os
        exec(open(_os.path.join(common.ROOT, "config", "tiny_cpu.py")).read())
        kernelbench_dir, variants_dir = {str(tmp / 'tasks')!r}, {str(tmp / 'variants')!r}
        time_budget_s, num_correct_trials = 0.2, 1
        max_iters, log_interval, eval_interval, warmup_iters = 30, 5, 15, 5
        num_prompts, num_generations, micro_batch_size, gen_batch_size, max_steps, save_interval = 1, 3, 3, 3, 4, 1
        num_samples = 2
    """))
    return path


def test_chain_interrupted_in_every_stage_continues(tmp_path):
    preset, out = micro_preset(tmp_path), tmp_path / "run"
    cmd = ["rl.py", f"--preset={preset}", f"--out_dir={out}"]
    # 1. prepare.py, Ctrl-C after its first measured kernel: the measured ones stay in seed.partial.jsonl
    p = start(cmd, tmp_path, tmp_path / "1.log")
    wait_for(p, lambda: len(lines(out / "seed.partial.jsonl")) >= 1, "a measured seed kernel")
    text = interrupt(p, signal.SIGINT, tmp_path / "1.log")
    assert "interrupted during prepare.py (stage 1 of 4: prepare -> sft -> rl -> evaluate)" in text, text[-3000:]
    assert f"continue with: python rl.py --preset={preset} --out_dir={out}\n" in text
    kept = len(lines(out / "seed.partial.jsonl"))
    assert kept >= 1 and not (out / "db.json").exists()
    # 2. the rerun reuses them; sft.py, SIGTERM (to the chaining process) during training: a checkpoint is saved
    p = start(cmd, tmp_path, tmp_path / "2.log")
    wait_for(p, lambda: "iter     5 |" in open(tmp_path / "2.log").read(), "SFT's 5th iteration")
    text = interrupt(p, signal.SIGTERM, tmp_path / "2.log")
    assert (f"reusing {kept} of 6 kernels measured by an interrupted run" in text) or kept == 6, text[-3000:]
    assert "interrupted during sft.py (stage 2 of 4" in text and "then saving a checkpoint" in text
    assert "continue with --resume=True" not in text    # inside the chain only rl.py says how to continue
    import torch
    it = torch.load(out / "sft" / "state.pt", weights_only=False)["iter"]
    assert 5 <= it < 30 and json.load(open(out / "chain.json")) == {"prepare.py": "done", "sft.py": "started"}
    # 3. the rerun continues SFT from there; RL, Ctrl-C after its first step: the step ends, a checkpoint is saved
    p = start(cmd, tmp_path, tmp_path / "3.log")
    wait_for(p, lambda: len(lines(out / "rl" / "log.jsonl")) >= 1, "RL's first step")
    text = interrupt(p, signal.SIGINT, tmp_path / "3.log")
    assert f"resumed at iter {it}" in text and "iter    30 |" in text, text[-3000:]
    assert f"prepare.py: done earlier in {out}, skipped" in text, text[-3000:]
    assert text.index("$ python sft.py") < text.index("rl.py: RL, stage 3 of 4") < text.index("RL step"), text[-3000:]
    assert "rl.py interrupted during RL step" in text and "saved a checkpoint after RL step" in text
    step = torch.load(out / "rl" / "ckpt" / "state.pt", weights_only=False)["step"]
    assert 1 <= step < 4
    # 4. a plain rerun refuses to mix a second RL run into this folder; --resume=True continues RL, then evaluate.py
    # is stopped (SIGTERM) as soon as it has started
    p = start(cmd, tmp_path, tmp_path / "4.log")
    assert p.wait(timeout=600) == 1 and "--resume=True continues it" in open(tmp_path / "4.log").read()
    p = start(cmd + ["--resume=True"], tmp_path, tmp_path / "5.log")
    wait_for(p, lambda: "tasks from" in open(tmp_path / "5.log").read(), "evaluate.py's start")
    text = interrupt(p, signal.SIGTERM, tmp_path / "5.log")
    assert f"resumed from {out}/rl/ckpt at step {step}" in text, text[-3000:]
    assert "interrupted during evaluate.py (stage 4 of 4" in text and "finishing step" not in text
    assert f"continue with: python rl.py --preset={preset} --out_dir={out} --resume=True" in text
    assert len(lines(out / "rl" / "log.jsonl")) == 4
    # 5. the same command once more finishes the evaluation: before and after RL side by side
    p = start(cmd + ["--resume=True"], tmp_path, tmp_path / "6.log")
    assert p.wait(timeout=900) == 0, open(tmp_path / "6.log").read()[-4000:]
    summary = json.load(open(out / "eval" / "summary.json"))
    assert set(summary["per_sample"]) == {"before_rl", "after_rl"}
    assert summary["env"]["torch_version"] == torch.__version__
    assert json.load(open(out / "chain.json")) == {"prepare.py": "done", "sft.py": "done", "evaluate.py": "done"}
    # 6. --resume=True on the finished run: no training, the report again, and it says so (a bare
    # "resumed from ... at step 4" line reads as a restart)
    p = start(cmd + ["--resume=True"], tmp_path, tmp_path / "7.log")
    assert p.wait(timeout=600) == 0, open(tmp_path / "7.log").read()[-4000:]
    text = open(tmp_path / "7.log").read()
    assert "at step 4 (all 4 steps done: no more training, the report again)" in text, text[-3000:]
    assert len(lines(out / "rl" / "log.jsonl")) == 4
