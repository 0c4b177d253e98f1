"""The stage scripts' command lines: --help prints the docstring and every setting; an rl.py run never mixes into
an earlier run's folder; prepare.py rejects an unknown split. Real subprocesses, each stopping before any work."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(*args):
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("script,setting", [("prepare.py", "--teachers=''"), ("sft.py", "--lr="),
                                            ("rl.py", "--num_generations=8"),
                                            ("evaluate.py", "--baselines='eager,compile'")])
def test_help_lists_the_settings(script, setting):
    p = _run(script, "--help")
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.splitlines()[0].strip(), p.stdout[-3000:]
    assert "settings (--key=value" in p.stdout and setting in p.stdout, p.stdout[-3000:]


def test_config_block_of_a_script_without_a_config_header(tmp_path):
    """scripts/ write their settings between two "# ----" rules without "# config": --help lists them (it raised
    StopIteration there); a file with no rule at all has no settings."""
    import common
    rules = tmp_path / "rules.py"
    rules.write_text('"""doc"""\nimport os\n# ------\nmodels = "1.5b"  # which models\nseed = 0\n# ------\nx = 1\n')
    assert common.config_block(str(rules)) == [("", [("models", "which models"), ("seed", "")])]
    bare = tmp_path / "bare.py"
    bare.write_text("x = 1\n")
    assert common.config_block(str(bare)) == []


def test_the_chain_passes_each_stage_its_own_settings():
    """rl.py's command line reaches the stages it chains: the shared settings, and each stage's own that rl.py has
    not (prepare.py's variants_dir, sft.py's max_iters, evaluate.py's num_samples); rl.py's own lr and resume stay
    RL's. Both spellings, --key=value and --key value, go on as --key=value."""
    from training import stages
    argv = ["--preset", "demo", "--variants_dir=/kernels", "--max_iters", "30", "--lr=1e-5", "--num_samples=2",
            "--resume", "--kernelbench_dir=/kb", "--download=True"]
    assert stages.stage_args("prepare.py", argv) == ["--preset=demo", "--variants_dir=/kernels",
                                                     "--kernelbench_dir=/kb", "--download=True"]
    assert stages.stage_args("sft.py", argv) == ["--preset=demo", "--max_iters=30"]   # no KernelBench settings there
    assert stages.stage_args("evaluate.py", argv) == ["--preset=demo", "--num_samples=2", "--kernelbench_dir=/kb"]


@pytest.mark.parametrize("args,refused", [
    (["sft.py", "--num_generations=3"], "sft.py"),
    (["rl.py", "--prepare_if_missing=False", "--max_iters=5"], "rl.py, evaluate.py"),
    (["rl.py", "--max_iters=5", "--policy=x"], "rl.py, prepare.py, evaluate.py"),
    (["rl.py", "--max_iters=5"], None),
    (["evaluate.py", "--num_samples=3"], None)])
def test_a_setting_of_another_stage_is_refused(args, refused):
    """The preset serves every stage, so it defines each stage's settings in all of them: a stage refuses a setting
    that is neither its own nor that of a stage it chains (rl.py passes sft.py's max_iters on only when it runs it),
    where it would be taken and never used."""
    p = _run(*args, "--preset=tiny_cpu", "--help")
    if refused:
        owner = "rl.py" if "num_generations" in args[1] else "sft.py"
        assert p.returncode != 0 and f"is a setting of {owner}, not of {refused};" in p.stderr, p.stderr
    else:
        assert p.returncode == 0 and "settings (--key=value" in p.stdout, p.stderr[-2000:]


@pytest.mark.parametrize("script", ["prepare.py", "sft.py", "rl.py", "evaluate.py"])
def test_help_is_a_screen_with_a_meaning_for_every_setting(script):
    """About one screen; every setting on one line with the comment beside it in the config block,
    under the block's section headers; the values are those after --preset."""
    import common
    blocks = common.config_block(os.path.join(ROOT, script))
    keys = [k for _, items in blocks for k, _ in items]
    assert len(keys) > 15 and len(set(keys)) == len(keys)
    assert not [k for _, items in blocks for k, c in items if len(c) < 8], "settings without a meaning"
    p = _run(script, "--preset=tiny_cpu", "--help")
    lines = p.stdout.splitlines()
    assert p.returncode == 0 and len(lines) <= 80, (len(lines), p.stdout)  # one 80-line terminal
    for title, items in blocks:
        assert not title or f"\n{title}:\n" in p.stdout, title
        for k, comment in items:
            line = next(x for x in lines if x.startswith(f"  --{k}="))
            assert line.rstrip().endswith(comment), (line, comment)
    if script == "rl.py":  # the preset's value, not the default
        assert "  --num_generations=6 " in p.stdout and "chaining (the presets)" in p.stdout


def test_a_mistyped_preset_is_named():
    """--presett=demo: the hint names --preset, which is no config variable."""
    p = _run("rl.py", "--presett=demo")
    assert p.returncode != 0 and "unknown config key --presett (did you mean --preset?)" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr


def test_the_demo_names_its_choice_once_the_settings_are_accepted(tmp_path):
    rl = tmp_path / "out" / "rl"
    rl.mkdir(parents=True)
    (rl / "log.jsonl").write_text(json.dumps({"step": 0}) + "\n")  # the run then stops right after the settings
    p = _run("rl.py", "--preset=demo", f"--out_dir={tmp_path / 'out'}", "--prepare_if_missing=False")
    assert p.stdout.count("demo: ") == 1 and " demo (config/tiny" in p.stdout, p.stdout
    p = _run("rl.py", "--preset=demo", "--max_step=5")
    assert "unknown config key --max_step (did you mean --max_steps?)" in p.stderr and "demo: " not in p.stdout, \
        (p.stdout, p.stderr)


def test_rl_refuses_to_start_over_an_earlier_run(tmp_path):
    rl = tmp_path / "out" / "rl"
    rl.mkdir(parents=True)
    (rl / "log.jsonl").write_text(json.dumps({"step": 0}) + "\n" + json.dumps({"step": 1}) + "\n")
    p = _run("rl.py", "--preset=tiny_cpu", f"--out_dir={tmp_path / 'out'}", "--prepare_if_missing=False")
    assert p.returncode != 0 and "already holds a run (2 logged steps): --resume=True continues it" in p.stderr, \
        (p.stdout[-2000:], p.stderr[-2000:])
    assert (rl / "log.jsonl").read_text().count("\n") == 2      # nothing written
    # a finished run (every step logged, its report written) says so, and how to see it or make another
    (rl / "log.jsonl").write_text("".join(json.dumps({"step": i}) + "\n" for i in range(1000)))
    (tmp_path / "out" / "eval").mkdir()
    (tmp_path / "out" / "eval" / "summary.md").write_text("report")
    p = _run("rl.py", "--preset=tiny_cpu", f"--out_dir={tmp_path / 'out'}", "--prepare_if_missing=False")
    assert p.returncode == 0 and "holds a finished run (report: " in p.stdout and \
        "--resume=True prints the report again; --out_dir=ANOTHER_FOLDER makes another run" in p.stdout, \
        (p.stdout[-2000:], p.stderr[-2000:])                    # not an error: `rl.py ... && ...` goes on


def test_prepare_rejects_an_unknown_split(tmp_path):
    p = _run("prepare.py", "--split=foo", f"--out_dir={tmp_path}")
    assert p.returncode != 0 and "--split must be heldout or paper, not 'foo'" in p.stderr, p.stderr[-2000:]


def test_rl_warns_where_a_setting_means_something_else_elsewhere(tmp_path):
    """A prompt shape the SFT data and evaluate.py do not share, and a log-speedup reward whose failures would beat
    slow correct kernels: each gets one warning line before anything runs."""
    rl = tmp_path / "out" / "rl"
    rl.mkdir(parents=True)
    (rl / "log.jsonl").write_text(json.dumps({"step": 0}) + "\n")  # the run then stops right after the warnings
    p = _run("rl.py", "--preset=tiny_cpu", f"--out_dir={tmp_path / 'out'}", "--prepare_if_missing=False",
             "--num_exemplars=1", "--reward_shape=log_speedup")
    assert "warning: --num_exemplars=1, but prepare.py's SFT prompts and evaluate.py's contrastive prompt show 2" \
        in p.stdout, p.stdout
    assert "warning: reward_shape=log_speedup with failure_reward=0.0" in p.stdout, p.stdout
    p = _run("rl.py", "--preset=tiny_cpu", f"--out_dir={tmp_path / 'out'}", "--prepare_if_missing=False",
             "--reward_shape=log_speedup", "--failure_reward=-3")
    assert "warning" not in p.stdout, p.stdout


ZERO_CANDIDATE = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n" \
                 "        return torch.zeros_like(x)\n"
TINY_TASK = "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return {}\n" \
            "def get_inputs():\n    return [torch.randn(64, 256)]\ndef get_init_inputs():\n    return []\n"


@pytest.mark.parametrize("body,degenerate", [("torch.clamp(torch.softmax(x, dim=1) - 2.0, min=0.0)", True),
                                             ("x * torch.sigmoid(x)", False)], ids=["all_zeros", "swish"])
def test_bench_cli_says_what_the_degenerate_screen_found(tmp_path, body, degenerate):
    """bench.py's line beside the verdict: on a task whose true output is all zeros, a zero-output kernel's ok says
    the task is degenerate; on a normal task the screen found nothing (its kernel is incorrect there); with
    --no_screen and a candidate the scan rejects (no judge set up) it says the task was not screened."""
    task, cand = tmp_path / "task.py", tmp_path / "cand.py"
    task.write_text(TINY_TASK.format(body))
    cand.write_text(ZERO_CANDIDATE)
    p = _run("bench.py", str(task), str(cand), "--device=cpu", "--check_only", f"--build_root={tmp_path / 'b'}")
    first, line = (p.stdout.strip().splitlines() + ["", ""])[:2]
    assert (" ok" in first) == degenerate and "degenerate task" not in first, p.stdout + p.stderr[-2000:]
    if degenerate:
        assert line.startswith("task is degenerate: answering all zeros") and "speedups on it say nothing" in line
    else:
        assert line == "task screened: no trivial output (all zeros, a constant, its mean, its input) passes its " \
                       "check", p.stdout
    cand.write_text(ZERO_CANDIDATE.replace("torch.zeros_like(x)", "x.half().float() * 0"))
    p = _run("bench.py", str(task), str(cand), "--device=cpu", "--no_screen", f"--build_root={tmp_path / 'b'}")
    assert "precision_downgrade" in p.stdout and \
        p.stdout.strip().splitlines()[-1] == "task not screened for degenerate outputs: --no_screen", p.stdout


def test_bench_cli_passes_the_clock_on(tmp_path, monkeypatch):
    """--clock reaches evaluate() (the gate by default, claims when asked); an unknown clock is refused."""
    sys.path.insert(0, ROOT)
    import bench
    seen = []
    monkeypatch.setattr(bench, "evaluate", lambda *a, **kw: seen.append(kw["clock"]) or dict(status="crash"))
    monkeypatch.setattr(bench.record, "summary", lambda res: "")
    monkeypatch.setattr(bench.record, "screen_line", lambda *a: "")
    task, cand = tmp_path / "task.py", tmp_path / "cand.py"
    task.write_text(TINY_TASK.format("x"))
    cand.write_text(ZERO_CANDIDATE)
    assert bench.main([str(task), str(cand), "--device=cpu"]) == 1
    assert bench.main([str(task), str(cand), "--device=cpu", "--clock=claims"]) == 1
    assert seen == ["gate", "claims"]
    with pytest.raises(SystemExit):
        bench.main([str(task), str(cand), "--clock=events"])


@pytest.mark.parametrize("task_text,says", [(ZERO_CANDIDATE, "are TASK and CANDIDATE swapped?"),
                                            ("import torch\n", "this one lacks Model, get_inputs, get_init_inputs"),
                                            ("x = (\n", "the task does not parse")],
                         ids=["swapped", "no_task", "syntax"])
def test_bench_cli_says_what_is_wrong_with_the_task_file(tmp_path, monkeypatch, task_text, says):
    """A task file that is not a task (the candidate given first; a module with no Model; bad syntax) stops with one
    line that names the file and the fault, before anything is built or run."""
    sys.path.insert(0, ROOT)
    import bench
    monkeypatch.setattr(bench, "evaluate", lambda *a, **kw: pytest.fail("evaluated a file that is not a task"))
    task, cand = tmp_path / "task.py", tmp_path / "cand.py"
    task.write_text(task_text)
    cand.write_text(TINY_TASK.format("x"))
    with pytest.raises(SystemExit) as stop:
        bench.main([str(task), str(cand), "--device=cpu"])
    assert str(stop.value).startswith(f"error: {task}: ") and says in str(stop.value), stop.value
