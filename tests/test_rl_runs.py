"""rl.py as real subprocesses on the CPU tasks (config/tiny_cpu.py): --resume continues exactly, and
`torchrun --nproc_per_node=2 rl.py` (gloo) keeps the ranks' weights identical and writes files from rank 0 only.

They continue from the session's tiny_cpu_prepared out_dir (conftest.py: prepare.py + sft.py, shared with
test_tiny_cpu and test_sft_selftrain)."""
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# small steps: 2 prompts x 3 answers, nothing chained
RL_ARGS = ["--preset=tiny_cpu", "--prepare_if_missing=False", "--run_evaluate=False", "--num_prompts=2",
           "--num_generations=3", "--micro_batch_size=3", "--gen_batch_size=6", "--save_interval=100"]


def env(tmp):
    return dict(os.environ, CUDAL1_BUILD_ROOT=str(tmp / "build"), PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1",
                PYTHONPATH=ROOT)


def run(args, tmp, timeout=900):
    p = subprocess.run([sys.executable] + args, cwd=ROOT, env=env(tmp), capture_output=True, text=True,
                       timeout=timeout)
    assert p.returncode == 0, (p.stdout[-3000:], p.stderr[-3000:])
    return p


@pytest.fixture(scope="module")
def prepared(tiny_cpu_prepared):
    return tiny_cpu_prepared


def fresh(prepared, tmp, name):
    d = tmp / name
    shutil.copytree(prepared, d, ignore=shutil.ignore_patterns("rl"))
    return d


def lines(path):
    return [json.loads(line) for line in open(path)]


VOLATILE = ("t_gen", "t_eval", "t_train", "t_step", "wall", "new_kernels",  # wall-clock, and cache-dependent
            "gen_tokens_per_s", "peak_memory_gib")


def assert_same_checkpoint(ckpt_a, ckpt_b, start):
    """The weights and the AdamW state (step count, both moments) of two rl/ckpt folders agree bit for bit, and the
    weights moved away from `start` (the SFT model RL began from). A resume that lost the optimizer state (its
    moments start from zero again) changes the first update after it by up to ~1e-3 per weight, which that step's
    logged metrics cannot show (they are taken before its update)."""
    import torch
    from safetensors.torch import load_file
    wa, wb, w0 = (load_file(str(d / "model.safetensors")) for d in (ckpt_a, ckpt_b, start))
    assert wa.keys() == wb.keys(), sorted(set(wa) ^ set(wb))
    diff = {k: float((wa[k].double() - wb[k].double()).abs().max()) for k in wa if not torch.equal(wa[k], wb[k])}
    assert not diff, f"weights differ after the resume (max abs diff per tensor): {diff}"
    assert any(not torch.equal(wa[k], w0[k]) for k in wa), "RL left the weights as they were: a trivial match"
    oa, ob = (torch.load(d / "state.pt", weights_only=False)["opt"] for d in (ckpt_a, ckpt_b))
    assert oa["param_groups"] == ob["param_groups"]
    assert oa["state"] and oa["state"].keys() == ob["state"].keys(), (len(oa["state"]), len(ob["state"]))
    for i, sa in oa["state"].items():
        for k, v in sa.items():
            assert torch.equal(v, ob["state"][i][k]), f"optimizer state {k} of parameter {i} differs after the resume"


def test_resume_gives_the_same_next_step(prepared, tmp_path):
    # A: 4 steps straight. B: 2 steps, stop, --resume for the other 2. Bench timings are noisy, so B reuses A's
    # measured results (--result_cache): then every reward is the same function of the sampled code in both runs, and
    # the 3rd and 4th steps can only match if B restored weights, optimizer, database, cache and every RNG state
    # exactly; the final checkpoints (weights and optimizer state after two steps past the resume) match bit for bit.
    a, b = fresh(prepared, tmp_path, "a"), fresh(prepared, tmp_path, "b")
    run(["rl.py", *RL_ARGS, f"--out_dir={a}", "--max_steps=4"], tmp_path)
    cache = a / "rl" / "cache.json"
    run(["rl.py", *RL_ARGS, f"--out_dir={b}", "--max_steps=2", f"--result_cache={cache}"], tmp_path)
    p = run(["rl.py", *RL_ARGS, f"--out_dir={b}", "--max_steps=4", "--resume"], tmp_path)
    assert "resumed from" in p.stdout and "at step 2" in p.stdout
    la, lb = lines(a / "rl" / "log.jsonl"), lines(b / "rl" / "log.jsonl")
    assert [h["step"] for h in la] == [h["step"] for h in lb] == [0, 1, 2, 3]
    for ha, hb in zip(la, lb):
        for k in ha:
            if k not in VOLATILE:
                assert hb[k] == pytest.approx(ha[k], rel=1e-5, abs=1e-7), (ha["step"], k, ha[k], hb[k])
    for step in (2, 3):
        sa = [s for s in lines(a / "rl" / "samples.jsonl") if s["step"] == step]
        sb = [s for s in lines(b / "rl" / "samples.jsonl") if s["step"] == step]
        assert [s["completion"] for s in sa] == [s["completion"] for s in sb], step
        assert [s["advantage"] for s in sa] == pytest.approx([s["advantage"] for s in sb], abs=1e-6), step
    # not a trivial match: the policy was trained (a loss or KL that is not exactly 0 at some step)
    assert any(h["loss"] != 0.0 or h["kl"] != 0.0 for h in la), la
    assert_same_checkpoint(a / "rl" / "ckpt", b / "rl" / "ckpt", prepared / "sft")


def test_torchrun_two_ranks(prepared, tmp_path):
    d = fresh(prepared, tmp_path, "ddp")
    p = run(["-m", "torch.distributed.run", "--nproc_per_node=2", "--standalone", "rl.py", *RL_ARGS,
             f"--out_dir={d}", "--max_steps=2"], tmp_path)
    log = lines(d / "rl" / "log.jsonl")
    # rank 0 alone writes: one log line per step (not one per rank), one printed step line per step
    assert [h["step"] for h in log] == [0, 1] and all(h["world_size"] == 2 for h in log)
    assert p.stdout.count("step    0 |") == 1 and p.stdout.count("step    1 |") == 1
    # both ranks' samples (one prompt x 3 answers each, per step) are in the one samples.jsonl
    samples = lines(d / "rl" / "samples.jsonl")
    assert sorted((s["step"], s["rank"]) for s in samples) == sorted([(t, r) for t in (0, 1) for r in (0, 1)] * 3)
    # the ranks hold identical weights after every update
    for h in log:
        assert len(h["param_checksums"]) == 2 and h["param_checksums"][0] == h["param_checksums"][1], h
    assert (d / "rl" / "ckpt" / "state.pt").exists() and (d / "rl" / "curves.png").exists()
    import torch
    st = torch.load(d / "rl" / "ckpt" / "state.pt", weights_only=False)
    assert st["step"] == 2 and len(st["rank_rng"]) == 2


def test_ctrl_c_saves_a_checkpoint(prepared, tmp_path):
    import signal
    import time
    d = fresh(prepared, tmp_path, "sigint")
    log = d / "rl" / "log.jsonl"
    p = subprocess.Popen([sys.executable, "rl.py", *RL_ARGS, f"--out_dir={d}", "--max_steps=1000"], cwd=ROOT,
                         env=env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 600
    while not (log.exists() and log.read_text().count("\n") >= 1) and p.poll() is None and time.time() < deadline:
        time.sleep(0.5)
    p.send_signal(signal.SIGINT)
    out = p.communicate(timeout=300)[0]
    assert p.returncode == 130 and "saved a checkpoint after RL step" in out, out[-3000:]
    assert re.search(r"continue with: python \S*rl\.py .*--resume=True", out), out[-3000:]
    import torch
    st = torch.load(d / "rl" / "ckpt" / "state.pt", weights_only=False)
    assert st["step"] >= 1 and len(st["history"]) == st["step"]
    run(["rl.py", *RL_ARGS, f"--out_dir={d}", f"--max_steps={st['step'] + 1}", "--resume"], tmp_path)
    assert [h["step"] for h in lines(log)][-1] == st["step"]


def test_async_rollouts_run_and_resume_exactly(prepared, tmp_path):
    # async_rollouts=True on the CPU tasks: step k+1's batch is generated while step k's kernels
    # are evaluated, so every batch after the first is one update stale; and as in test_resume_gives_the_same_next_step,
    # 4 steps straight equal 2 steps + --resume (the batch generated ahead is in the checkpoint), checkpoints included
    a, b = fresh(prepared, tmp_path, "a"), fresh(prepared, tmp_path, "b")
    args = [*RL_ARGS, "--async_rollouts=True"]
    run(["rl.py", *args, f"--out_dir={a}", "--max_steps=4"], tmp_path)
    la = lines(a / "rl" / "log.jsonl")
    assert [h["step"] for h in la] == [0, 1, 2, 3] and [h["rollout_staleness"] for h in la] == [0, 1, 1, 1]
    assert any(h["loss"] != 0.0 for h in la), la
    cache = a / "rl" / "cache.json"
    run(["rl.py", *args, f"--out_dir={b}", "--max_steps=2", f"--result_cache={cache}"], tmp_path)
    p = run(["rl.py", *args, f"--out_dir={b}", "--max_steps=4", "--resume"], tmp_path)
    assert "at step 2" in p.stdout
    lb = lines(b / "rl" / "log.jsonl")
    assert [h["step"] for h in lb] == [0, 1, 2, 3]
    for ha, hb in zip(la, lb):
        for k in ha:
            if k not in VOLATILE:
                assert hb[k] == pytest.approx(ha[k], rel=1e-5, abs=1e-7), (ha["step"], k, ha[k], hb[k])
    for step in (2, 3):
        sa = [s["completion"] for s in lines(a / "rl" / "samples.jsonl") if s["step"] == step]
        assert sa == [s["completion"] for s in lines(b / "rl" / "samples.jsonl") if s["step"] == step], step
    assert_same_checkpoint(a / "rl" / "ckpt", b / "rl" / "ckpt", prepared / "sft")
