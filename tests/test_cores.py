"""cores.core_split / pin / pinned and their use: on a GPU box the timed side (the runner under the
GPU's lock, the judge, the parent's timing thread) runs on cores of its own, builds and other runners' imports on
the rest.
Real affinity syscalls and a real forked runner; the split itself from a faked core list."""
import os
import pathlib
import subprocess
import sys
import threading

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from harness import cores  # noqa: E402
from harness import forkserver  # noqa: E402
from harness import session  # noqa: E402
from harness import workers  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CPUS = sorted(os.sched_getaffinity(0))


def split_for(monkeypatch, cpus, pin_env=None, device="cuda", gpus=1, gpu=None, visible=None):
    monkeypatch.setattr(cores, "_SPLIT", [])
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(cpus))
    monkeypatch.setattr(cores, "_physical_gpus", lambda: gpus)
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    if pin_env is None:
        monkeypatch.delenv("CUDAL1_PIN", raising=False)
    else:
        monkeypatch.setenv("CUDAL1_PIN", pin_env)
    return cores.core_split(device, gpu)


def test_split_keeps_the_last_two_cores_for_timing(monkeypatch):
    assert split_for(monkeypatch, range(16)) == ([14, 15], list(range(14)))
    assert split_for(monkeypatch, [3, 5, 7, 9, 11, 13, 15, 17]) == ([15, 17], [3, 5, 7, 9, 11, 13])


def test_each_gpu_gets_its_own_timing_cores(monkeypatch):
    # two GPUs on 16 cores: GPU "0" the last two, GPU "1" the two before, builds the first 12
    assert split_for(monkeypatch, range(16), gpus=2, gpu="0") == ([14, 15], list(range(12)))
    assert split_for(monkeypatch, range(16), gpus=2, gpu="1") == ([12, 13], list(range(12)))
    assert split_for(monkeypatch, range(16), gpus=2, gpu=None) == ([14, 15], list(range(12)))   # the default GPU
    assert split_for(monkeypatch, range(8), gpus=2) is None                  # 4 x 2 x 2 = 16 cores needed
    # a rank that sees only its own GPU (CUDA_VISIBLE_DEVICES=1): still GPU 1's cores, not GPU 0's
    assert split_for(monkeypatch, range(16), gpus=2, visible="1") == ([12, 13], list(range(12)))
    # ids that are not plain indices below the GPU count (a UUID, a MIG instance, a miscount) get no split
    assert split_for(monkeypatch, range(16), gpus=2, gpu="2") is None
    assert split_for(monkeypatch, range(16), gpus=2, gpu="GPU-8e4c1a2b") is None
    assert split_for(monkeypatch, range(16), gpus=0) is None                 # no GPU: nothing is pinned


def test_no_split_on_small_boxes_on_the_cpu_device_or_when_turned_off(monkeypatch):
    assert split_for(monkeypatch, range(7)) is None                     # below PIN_MIN_CORES
    assert split_for(monkeypatch, range(16), device="cpu") is None      # CPU timing is CPU time, not wall
    assert split_for(monkeypatch, range(16), pin_env="0") is None


@pytest.mark.skipif(len(CPUS) < 2, reason="needs two usable cores")
def test_pin_is_best_effort():
    before = os.sched_getaffinity(0)
    cores.pin([10 ** 6])                 # no such core: the thread stays where it was, no error
    assert os.sched_getaffinity(0) == before


@pytest.mark.skipif(len(CPUS) < 2, reason="needs two usable cores")
def test_pinned_moves_only_this_thread_and_restores_it():
    seen = {}

    def work():
        before = os.sched_getaffinity(0)
        with cores.pinned([CPUS[-1]]):
            seen["inside"] = os.sched_getaffinity(0)
            seen["main"] = os.sched_getaffinity(os.getpid())              # the main thread is not moved
        seen["after"], seen["before"] = os.sched_getaffinity(0), before
    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert seen["inside"] == {CPUS[-1]} and seen["main"] == set(CPUS) and seen["after"] == seen["before"]


@pytest.mark.skipif(len(CPUS) < 2, reason="needs two usable cores")
def test_a_forked_runner_starts_on_the_build_cores_and_times_on_the_timing_cores():
    folder = pathlib.Path(forkserver.work_folder())    # a worker's folder: seen inside bubblewrap too
    task, cand = folder / "task.py", folder / "candidate.py"
    task.write_text("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x + 1\n"
                    "def get_inputs():\n    return [torch.ones(4)]\ndef get_init_inputs():\n    return []\n")
    cand.write_text("import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x + 1\n")
    spec = dict(device="cpu", protocol="strict", task_path=str(task), candidate_path=str(cand), flags_override=None,
                nice=0, cpus=dict(start=[CPUS[0]], timed=[CPUS[-1]]))
    w = workers.Worker("runner", spec, forkserver.scrubbed_env(str(folder)), str(folder))
    try:
        assert os.sched_getaffinity(w.pid) == {CPUS[0]}
        r, _ = w.ask(dict(op="import"), 120)
        assert r["ok"] and os.sched_getaffinity(w.pid) == {CPUS[0]}
        r, _ = w.ask(dict(op="models"), 120)
        assert r["ok"] and os.sched_getaffinity(w.pid) == {CPUS[-1]}
    finally:
        w.kill()


@pytest.mark.skipif(len(CPUS) < 2, reason="needs two usable cores")
def test_an_evaluation_with_a_core_split_runs_whole(monkeypatch, tmp_path):
    # the GPU-only path (core_split gives a split only for CUDA on 8+ cores) forced on the CPU device: the runner's
    # spec, the judge's spec and the parent's pinned timing thread, through a real evaluation
    import bench
    from harness import record
    seen, locked = [], []
    monkeypatch.setattr(cores, "core_split", lambda device, gpu=None: seen.append(device) or ([CPUS[-1]], CPUS[:-1]))
    setup = session.Session.setup

    def watched_setup(self):              # under the GPU's lock: where are this thread and the judge?
        locked.append((os.sched_getaffinity(0), os.sched_getaffinity(self.judge_worker.worker.pid)))
        return setup(self)
    monkeypatch.setattr(session.Session, "setup", watched_setup)
    task = ("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n"
            "def get_inputs():\n    return [torch.randn(256)]\ndef get_init_inputs():\n    return []\n")
    cand = task.replace("class Model(", "class ModelNew(")
    before = os.sched_getaffinity(0)
    r = bench.evaluate(task, cand, device="cpu", num_correct_trials=2, time_budget_s=0.1,
                       build_root=str(tmp_path / "build"))
    assert r["status"] == "ok" and r["correct"], record.summary(r)
    assert seen and os.sched_getaffinity(0) == before          # this thread is back where it was
    assert locked == [({CPUS[-1]}, {CPUS[-1]})]                  # the caller's thread and the judge on the timing core


@pytest.mark.skipif(len(CPUS) < 2, reason="needs two usable cores")
def test_a_runner_builds_on_its_build_cores_after_models(tmp_path):
    # a load_inline made under the GPU's lock (after `models` moved the runner to the timing core) runs its
    # compiler on the build cores: the affinity the build sees, recorded by a stand-in compile step
    from harness import buildcache
    seen = []
    cores.BUILD_CPUS[:] = [CPUS[0]]
    try:
        with cores.pinned([CPUS[-1]]), buildcache._on_build_cores():
            seen.append(os.sched_getaffinity(0))
        assert seen == [{CPUS[0]}]
    finally:
        cores.BUILD_CPUS[:] = []


@pytest.mark.skipif(len(CPUS) < 2, reason="needs two usable cores")
def test_the_fork_server_starts_on_the_build_cores():
    # a fresh process (the fork server is one per process): with a split, the zygote is moved off the timing cores
    code = (f"import os, sys; sys.path.insert(0, {ROOT!r}); from harness import cores, forkserver\n"
            f"cores.core_split = lambda device, gpu=None: ([{CPUS[-1]}], [{CPUS[0]}])\n"
            "z = forkserver.fork_server(); print(sorted(os.sched_getaffinity(z.proc.pid))); z.close()\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and p.stdout.strip().splitlines()[-1] == f"[{CPUS[0]}]", p.stdout + p.stderr
