"""README.md's "A real run" as written, on the CPU: its command lines are read from the README's code block (so the two
cannot drift) and run in order, prepare.py -> sft.py under torchrun -> sft.py stage 2 -> rl.py under torchrun ->
evaluate.py, with 8 gloo ranks where the README says torchrun. Each line gets settings appended that swap in the CPU
tasks, a tiny model and one step (later --key=value settings win, common.configure); everything the README sets stays,
among them --gpu a100, whose num_prompts=4 must work on 8 ranks."""
import json
import os
import shlex
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SETTINGS = {  # appended to the README's lines of each script: the CPU tasks, a tiny model, one step, short answers
    "prepare.py": [f"--kernelbench_dir={os.path.join(ROOT, 'data', 'tiny_cpu', 'tasks')}", "--levels=0",
                   f"--variants_dir={os.path.join(ROOT, 'data', 'tiny_cpu')}", "--teachers=", "--eval_fraction=0.5",
                   "--screen_degenerate=False"],
    "sft.py": ["--init_from=tiny", "--max_iters=1", "--batch_size=1", "--vocab_size=512", "--n_layer=1", "--n_embd=32",
               "--n_head=2", "--max_len=512", "--dtype=float32", "--self_train_samples=1", "--self_train_iters=1",
               "--max_new_tokens=16", "--gen_batch_size=4"],
    "rl.py": ["--max_steps=1", "--num_generations=2", "--max_completion_length=16", "--gen_batch_size=2",
              "--micro_batch_size=2"],
    "evaluate.py": ["--levels=0", "--max_new_tokens=16", "--baselines=eager", "--compile_workers=0"],
}
ON_CPU = ["--device=cpu", "--num_correct_trials=1", "--time_budget_s=0.05", "--build_workers=2"]


def readme_commands():
    """The command lines of the first ```bash block after "## A real run" in README.md, as argument lists (lines
    continued with a backslash joined, comments dropped)."""
    text = open(os.path.join(ROOT, "README.md")).read()
    section = text[text.index("## A real run"):]
    block = section[section.index("```bash\n") + len("```bash\n"):]
    block = block[:block.index("```")].replace("\\\n", " ")
    return [shlex.split(line, comments=True) for line in block.splitlines() if line.strip()]


def local_command(argv):
    """A README line as this test runs it: `python X.py` with this interpreter, `torchrun ...` as
    `python -m torch.distributed.run --standalone ...` (a free port on one machine), the script from the repository,
    the settings of SETTINGS and ON_CPU appended."""
    script = next(a for a in argv if a.endswith(".py"))
    at = argv.index(script)
    launcher = [sys.executable] if argv[0] == "python" else \
        [sys.executable, "-m", "torch.distributed.run", "--standalone", *argv[1:at]]
    assert argv[0] in ("python", "torchrun"), argv
    return script, launcher + [os.path.join(ROOT, script), *argv[at + 1:], *SETTINGS[script], *ON_CPU]


def test_readme_lines_are_the_real_run():
    lines = readme_commands()
    assert [next(a for a in argv if a.endswith(".py")) for argv in lines] == \
        ["prepare.py", "sft.py", "sft.py", "rl.py", "evaluate.py"], lines
    assert "--download=True" in lines[0] and all("--gpu" in argv for argv in lines)
    assert [argv[:2] for argv in lines if argv[0] == "torchrun"] == [["torchrun", "--nproc_per_node=8"]] * 2


@pytest.mark.slow
def test_readme_real_run_on_cpu_with_8_ranks(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1",
               CUDAL1_BUILD_ROOT=str(tmp_path / "build"))
    env.pop("KERNELBENCH_DIR", None)
    out, seconds = {}, {}
    for i, argv in enumerate(readme_commands()):
        script, cmd = local_command(argv)
        start = time.time()
        p = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
        seconds[f"{i}:{script}"] = round(time.time() - start, 1)
        assert p.returncode == 0, (" ".join(argv), p.stdout[-3000:], p.stderr[-3000:])
        out[i] = p.stdout
    print("seconds per README line:", seconds)
    run = tmp_path / "out"
    # stage 1 on 8 ranks: one model (equal weights on every rank)
    checksums = {line.split()[-1] for line in out[1].splitlines() if " param checksum " in line}
    assert len(checksums) == 1 and out[1].count(" param checksum ") == 8, out[1][-2000:]
    assert (run / "self_train" / "round2" / "model" / "config.json").exists()
    # rl.py: the a100 preset's 4 prompts rounded up to one per rank, one step logged by rank 0 for all 8 ranks
    assert "num_prompts=4 rounded up to 8: 1 per rank on 8 ranks" in out[3], out[3][-2000:]
    log = [json.loads(line) for line in open(run / "rl" / "log.jsonl")]
    assert [h["step"] for h in log] == [0] and log[0]["world_size"] == 8, log
    assert len(set(log[0]["param_checksums"])) == 1, log[0]["param_checksums"]
    assert log[0]["gen_tokens_per_s"] > 0 and log[0]["peak_memory_gib"] is None, log[0]
    trained = log[0]["truncated"] < 1  # a tiny model's answers may all run out: masked, nothing trained, no norm
    assert (log[0]["grad_norm"] is not None) == trained and (not trained or log[0]["grad_norm"] >= 0), log[0]
    samples = [json.loads(line) for line in open(run / "rl" / "samples.jsonl")]
    assert sorted({s["rank"] for s in samples}) == list(range(8)) and len(samples) == 8 * 2
    # evaluate.py: the two models side by side, on the eval split
    summary = (run / "eval" / "summary.md").read_text()
    assert "before_rl" in summary and "after_rl" in summary and "tasks/new_gelu" in summary, summary[:2000]
