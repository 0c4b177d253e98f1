"""Errors a user can act on: each of these mistakes ends a stage script with one line that gives
the cause and the fix, fast, and without a traceback. Real subprocesses, each stopping before any real work."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(ROOT, "tests", "fixtures")


def run(args, env=None, timeout=300):
    full = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env=dict(full, **(env or {})))


def one_error_line(p):
    """The one line a failed script printed on stderr (asserting that it is one line and no traceback)."""
    lines = [x for x in p.stderr.splitlines() if x.strip()]
    assert p.returncode == 1 and "Traceback" not in p.stderr and len(lines) == 1, (p.returncode, p.stderr[-3000:])
    return lines[0]


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "sft.jsonl"
    path.write_text(json.dumps(dict(prompt="p", response="r")) + "\n")
    return str(path)


def test_unknown_hub_name_fails_fast_when_the_hub_cannot_be_reached(tmp_path, data):
    # HF_ENDPOINT on a closed local port: the same answer on every machine, with or without network. Unchecked,
    # transformers retries for 49 s ("Retrying in 8s [Retry 5/5]") and then blamed the network in a traceback.
    p = run(["sft.py", "--init_from=no-such/Model", f"--data={data}", "--device=cpu", f"--out_dir={tmp_path}"],
            env=dict(HF_ENDPOINT="http://127.0.0.1:9", HF_HOME=str(tmp_path / "hf")))
    line = one_error_line(p)
    assert line.startswith("error: model 'no-such/Model' is neither a local folder nor in the Hugging Face cache, and "
                           "cannot be downloaded (127.0.0.1:9 cannot be reached"), line
    assert "hf download no-such/Model" in line and "Retry" not in p.stderr + p.stdout
    p = run(["sft.py", "--init_from=no-such/Model", f"--data={data}", "--device=cpu", f"--out_dir={tmp_path}"],
            env=dict(HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf")))
    assert "(HF_HUB_OFFLINE is set)" in one_error_line(p)


def test_mistyped_and_empty_local_folders(tmp_path, data):
    (tmp_path / "run" / "sft").mkdir(parents=True)
    p = run(["sft.py", f"--init_from={tmp_path}/run/sftt", f"--data={data}", "--device=cpu", f"--out_dir={tmp_path}"])
    assert one_error_line(p) == f"error: model folder '{tmp_path}/run/sftt' does not exist; did you mean " \
                                f"'{tmp_path}/run/sft'?"
    p = run(["sft.py", "--init_from=no-such-folder/", f"--data={data}", "--device=cpu", f"--out_dir={tmp_path}"],
            env=dict(HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf")))    # a trailing /: a path, never a hub name
    assert one_error_line(p).startswith("error: model folder 'no-such-folder/' does not exist; "), one_error_line(p)
    p = run(["sft.py", "--init_from=no-such-folder/", "--device=cpu", f"--out_dir={tmp_path}/empty"],
            env=dict(HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf")))    # no data either: the model is named first
    assert one_error_line(p).startswith("error: model folder 'no-such-folder/' does not exist; "), one_error_line(p)
    (tmp_path / "run" / "tasks.jsonl").write_text(json.dumps(dict(name="t/a", level=0, src="", split="train")) + "\n")
    p = run(["rl.py", "--device=cpu", f"--policy={tmp_path}/run/sft", f"--out_dir={tmp_path}/run",
             "--prepare_if_missing=False"])
    assert one_error_line(p) == f"error: model folder '{tmp_path}/run/sft' holds no model (no config.json); give a " \
                                "folder that sft.py or rl.py saved (out/sft, out/rl/ckpt) or a Hugging Face name"


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="needs a machine without a CUDA GPU")
def test_a_mistyped_model_folder_is_named_before_the_device(tmp_path, data):
    """On a CPU machine with the default --device=cuda, the device error would hide a mistyped model folder: the
    folder comes first, the device error only once the folder is right."""
    (tmp_path / "run" / "sft").mkdir(parents=True)
    (tmp_path / "run" / "sft" / "config.json").write_text("{}")
    for args in (["rl.py", f"--policy={tmp_path}/run/sftt", f"--out_dir={tmp_path}/run"],
                 ["sft.py", f"--init_from={tmp_path}/run/sftt", f"--data={data}", f"--out_dir={tmp_path}/run"]):
        p = run(args + ["--device=cuda"])
        assert one_error_line(p) == f"error: model folder '{tmp_path}/run/sftt' does not exist; did you mean " \
                                    f"'{tmp_path}/run/sft'?", args
    p = run(["rl.py", f"--policy={tmp_path}/run/sft", f"--out_dir={tmp_path}/run", "--device=cuda"])
    assert one_error_line(p).startswith("error: device='cuda' but no CUDA GPU is visible"), p.stderr

def test_malformed_kernels_file_names_file_line_and_cause(tmp_path):
    task = json.loads(open(os.path.join(FIX, "eval_tasks.jsonl")).readline())
    bad = tmp_path / "k.jsonl"
    good_line = json.dumps(dict(task=task["name"], code="class ModelNew: pass"))
    bad.write_text(good_line + "\n\n" + '{"task": "x", "code": \n')
    args = [f"--tasks_file={FIX}/eval_tasks.jsonl", "--device=cpu", "--baselines=eager", f"--eval_dir={tmp_path}/e"]
    p = run(["evaluate.py", f"--kernels={bad}", *args])
    assert one_error_line(p) == f"error: {bad}:3: not valid JSON (Expecting value: column 22); fix or delete that line"
    bad.write_text('["level1/1_RowScale", "class ModelNew: pass"]\n')
    p = run(["evaluate.py", f"--kernels={bad}", *args])
    assert one_error_line(p) == f"error: {bad}:1: neither {{'task', 'code'}} nor a CUDA-L1 line (level_id, task_id); " \
                                "got a JSON list"
    # a missing file is named before anything about the device (on a newcomer's CPU machine with the default
    # --device=cuda, the device error must not hide a mistyped path)
    p = run(["evaluate.py", f"--kernels={tmp_path}/missing.jsonl", "--device=cuda", f"--eval_dir={tmp_path}/e"])
    assert one_error_line(p) == f"error: kernels file '{tmp_path}/missing.jsonl' not found"
    # ... and so is a malformed line (a GPU-less CI machine is the CPU newcomer's case: --device=cuda fails here)
    bad2 = tmp_path / "k2.jsonl"
    bad2.write_text('{"task": "x", "code": \n')
    p = run(["evaluate.py", f"--kernels={bad2}", "--device=cuda", f"--eval_dir={tmp_path}/e"])
    assert one_error_line(p) == f"error: {bad2}:1: not valid JSON (Expecting value: column 22); fix or delete that line"
    p = run(["prepare.py", f"--kernelbench_dir={ROOT}/data/tiny_cpu/tasks", "--levels=0", "--device=cpu",
             f"--out_dir={tmp_path}/p", f"--import_kernels={bad}"])
    assert f"{bad}:1: neither" in one_error_line(p)


def test_a_crash_that_printed_nothing_says_so(tmp_path):
    """A candidate that dies silently: the stage's line says that it printed nothing, never an empty "log tail:"."""
    task = json.loads(open(os.path.join(FIX, "eval_tasks.jsonl")).readline())
    kern = tmp_path / "k.jsonl"
    die = "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n"     # os._exit is flagged by the static scan
    kern.write_text(json.dumps(dict(task=task["name"], code=die + task["src"].replace(
        "class Model(", "class ModelNew("))) + "\n")
    p = run(["evaluate.py", f"--kernels={kern}", f"--tasks_file={FIX}/eval_tasks.jsonl", "--device=cpu",
             "--baselines=eager", f"--eval_dir={tmp_path}/e", f"--task_names={task['name']}", "--timeout_s=120",
             "--time_budget_s=0.2", "--num_correct_trials=1"])
    assert p.returncode == 0, p.stderr[-3000:]
    line = next(x for x in p.stdout.splitlines() if x.startswith(f"{task['name']} kernels: "))
    assert line == f"{task['name']} kernels: crash | the candidate process died (signal 9) during import (still " \
                   "importing / building the candidate) and printed nothing", line
    assert not [x for x in p.stdout.splitlines() if x.rstrip().endswith("log tail:")]


def test_error_line_by_hand():
    import common
    assert common.error_line(dict(error="the child died (exit status 3); log tail:\n")) == \
        "the child died (exit status 3); the process printed nothing"
    assert common.error_line(dict(error="no result within 9 s; log tail:\nstep 1\nKilled\n\n")) == \
        "no result within 9 s; its last output line: Killed"
    assert common.error_line(dict(error="ValueError: x\nmore")) == "ValueError: x" and common.error_line({}) == ""


def test_evaluate_stops_before_writing_for_a_mistyped_model_folder_or_task_folder(tmp_path):
    """A newcomer's two mistakes: a mistyped --model folder stops evaluate.py before it writes out_dir/eval/runs.jsonl
    (which would name that folder among the candidates); a $KERNELBENCH_DIR that is not a folder is named."""
    (tmp_path / "out" / "sft").mkdir(parents=True)
    p = subprocess.run([sys.executable, os.path.join(ROOT, "evaluate.py"), "--preset=demo", "--model=out/sfft",
                        "--out_dir=out/x7"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    line = one_error_line(p)
    assert line == "error: model folder 'out/sfft' does not exist; did you mean 'out/sft'?", line
    assert sorted(os.listdir(tmp_path / "out")) == ["sft"]                 # nothing written
    p = run(["evaluate.py", "--device=cpu", "--baselines=eager", "--levels=1", f"--out_dir={tmp_path / 'x8'}"],
            env=dict(KERNELBENCH_DIR=str(tmp_path / "no_such_folder")))
    assert f"$KERNELBENCH_DIR={tmp_path / 'no_such_folder'} is not a folder" in one_error_line(p), p.stderr


def test_a_busy_machine_is_named_before_a_cpu_run(monkeypatch, capsys):
    """Three quarters of the usable cores busy (1-minute load), a CPU run says so once per command (the stages it
    chains inherit the mark), on rank 0 only; an idle machine and the other ranks print nothing."""
    import common
    assert common.busy_line(load=1.4, cores=2) is None and common.busy_line(load=1.4, cores=1) is None
    assert common.busy_line(load=3.0, cores=2).startswith("warning: this machine is busy (load 3.0 on 2 cores)")
    assert common.busy_line(load=12.0, cores=16) and common.busy_line(load=11.9, cores=16) is None
    monkeypatch.setenv("CUDAL1_LOAD_CHECKED", "")
    monkeypatch.setattr(common.os, "getloadavg", lambda: (6.0, 1.0, 1.0))
    monkeypatch.setattr(common.os, "sched_getaffinity", lambda pid: {0, 1})
    common.check_device("cpu")
    assert "machine is busy (load 6.0 on 2 cores)" in capsys.readouterr().out
    common.check_device("cpu")                         # a chained stage: checked once already
    assert capsys.readouterr().out == ""
    monkeypatch.setenv("CUDAL1_LOAD_CHECKED", "")
    monkeypatch.setenv("RANK", "1")
    common.check_device("cpu")
    monkeypatch.delenv("RANK")
    monkeypatch.setenv("CUDAL1_LOAD_CHECKED", "")
    monkeypatch.setattr(common.os, "getloadavg", lambda: (0.5, 1.0, 1.0))
    common.check_device("cpu")
    assert capsys.readouterr().out == ""
