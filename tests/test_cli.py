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
                                            ("rl.py", "--num_generations=8"), ("evaluate.py", "--baselines='eager,compile'")])
def test_help_lists_the_settings(script, setting):
    p = _run(script, "--help")
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.splitlines()[0].strip() and "settings (--key=value" in p.stdout and setting in p.stdout, p.stdout[-3000:]


def test_rl_refuses_to_start_over_an_earlier_run(tmp_path):
    rl = tmp_path / "out" / "rl"
    rl.mkdir(parents=True)
    (rl / "log.jsonl").write_text(json.dumps({"step": 0}) + "\n" + json.dumps({"step": 1}) + "\n")
    p = _run("rl.py", "--preset=tiny_cpu", f"--out_dir={tmp_path / 'out'}", "--prepare_if_missing=False")
    assert p.returncode != 0 and "already holds a run (2 logged steps): --resume=True continues it" in p.stderr, \
        (p.stdout[-2000:], p.stderr[-2000:])
    assert (rl / "log.jsonl").read_text().count("\n") == 2      # nothing written


def test_prepare_rejects_an_unknown_split(tmp_path):
    p = _run("prepare.py", "--split=foo", f"--out_dir={tmp_path}")
    assert p.returncode != 0 and "--split must be heldout or paper, not 'foo'" in p.stderr, p.stderr[-2000:]
