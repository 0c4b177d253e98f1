"""The runner's sandbox (harness/sandbox.py) against candidates that reach outside their own verdict, on the CPU device.

Each attack computes the right answer (its own verdict is ok) and, at import, tries one door: a start-up hook (.pth)
written into a site-packages folder, an edit of a repository file, a file planted in another candidate's build
entries, a precompiled header or a top-level entry of the shared build root, a TCP connection to this process, a
signal to this process. The targets are folders and a listener this test owns (a fake site folder, a copy of a
repository file, a build root of its own), never the real ones. All attacks run in one bench.evaluate_many per
sandbox mode (check_only: the import and the trials, nothing timed; a few seconds): with the sandbox on (Landlock
alone, and Landlock + bubblewrap where bwrap is found) every door stays shut and the next process is unaffected;
with CUDAL1_SANDBOX=off every attack succeeds, so each check can fail.
"""
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import bench  # noqa: E402
from harness import record, sandbox  # noqa: E402

TASK = open(os.path.join(ROOT, "tests", "fixtures", "cpu_task_scale.py")).read()
HONEST = """
class ModelNew(nn.Module):
    def forward(self, x):
        return x * 2 + 1
"""
# Each attack's door, run at import; every failure swallowed, so that its own verdict stays ok.
ATTACKS = {
    "pth_hook": """
for folder in [pathlib.Path({site!r})]:      # site.getsitepackages() in a real attack
    try:
        (folder / "cudal1_zz_hook.pth").write_text("import os; os.environ['CUDAL1_HOOKED'] = '1'\\n")
    except OSError:
        pass
""",
    "repo_edit": """
try:
    with pathlib.Path({repo_file!r}).open("a") as f:
        f.write("\\nOWNED = True\\n")
except OSError:
    pass
""",
    "build_cache": """
for target in [{victim!r}, {pch!r}, {shared!r}]:
    try:
        pathlib.Path(target).parent.mkdir(parents=True, exist_ok=True)
        pathlib.Path(target).write_text("planted")
    except OSError:
        pass
""",
    "tcp": """
try:
    s = socket.create_connection(("127.0.0.1", {port}), timeout=5)
    s.sendall(b"owned")
    s.close()
except OSError:
    pass
""",
    "signal_parent": """
try:
    os.kill({pid}, signal.SIGUSR1)
except OSError:
    pass
""",
}
HEADER = "import os, pathlib, signal, socket\nimport torch\nimport torch.nn as nn\n"


def modes():
    """(CUDAL1_SANDBOX value, the record's expected sandbox) for each mode this machine can run."""
    out = [("off", "none")]
    if sandbox.landlock_abi() >= 6:
        out.append(("landlock", "landlock"))
        if sandbox.bwrap_path():
            out.append(("auto", "landlock+bwrap"))
    return out


@pytest.fixture(scope="module", params=modes(), ids=lambda m: m[0])
def attacked(request, tmp_path_factory):
    """One batch of every attack under one sandbox mode, on the CPU device."""
    value, expected = request.param
    return run_attacks(value, expected, tmp_path_factory.mktemp(f"sandbox_{value}"), "cpu")


def run_attacks(value, expected, tmp, device, extra_jobs=(), **kw):
    """Every attack (and extra_jobs, evaluated with them) in one evaluate_many under CUDAL1_SANDBOX=value (check_only
    unless kw says otherwise); returns what each door shows afterwards and the records by job name."""
    site, repo_file, build_root = tmp / "site-packages", tmp / "repo" / "harness" / "scan.py", tmp / "build"
    site.mkdir()
    repo_file.parent.mkdir(parents=True)
    shutil.copy(os.path.join(ROOT, "harness", "scan.py"), repo_file)
    victim_dir = build_root / "candidates" / record.source_hash(HEADER + HONEST) / ("0" * 32)
    victim_dir.mkdir(parents=True)
    (victim_dir / "done").write_text('{"module": "victim", "so": "victim.so"}')
    listener = socket.create_server(("127.0.0.1", 0))
    listener.setblocking(False)
    signals = []
    old = signal.signal(signal.SIGUSR1, lambda *a: signals.append(a[0]))
    fill = dict(site=str(site), repo_file=str(repo_file), victim=str(victim_dir / "done"),
                pch=str(build_root / "pch" / "0123456789abcdef" / "cudal1_light.h.gch"),
                shared=str(build_root / ("f" * 32) / "done"), port=listener.getsockname()[1], pid=os.getpid())
    jobs = [(name, TASK, HEADER + door.format(**fill) + HONEST) for name, door in ATTACKS.items()] + list(extra_jobs)
    before = (repo_file.read_text(), (victim_dir / "done").read_text())
    env_before = os.environ.get("CUDAL1_SANDBOX")
    os.environ["CUDAL1_SANDBOX"] = value
    try:
        t0 = time.perf_counter()
        results = bench.evaluate_many(jobs, **dict(dict(device=device, check_only=True, static_checks=False,
                                                        timeout_s=120, build_root=str(build_root)), **kw))
        took = time.perf_counter() - t0
        time.sleep(0.2)                                       # a signal sent last is handled by now
        try:
            conn, _ = listener.accept()
            conn.settimeout(2)
            tcp = conn.recv(16)
        except BlockingIOError:
            tcp = None
    finally:
        listener.close()
        signal.signal(signal.SIGUSR1, old)
        os.environ.pop("CUDAL1_SANDBOX")
        if env_before is not None:
            os.environ["CUDAL1_SANDBOX"] = env_before
    hook = site / "cudal1_zz_hook.pth"
    fresh = subprocess.run([sys.executable, "-c", f"import site, os; site.addsitedir({str(site)!r}); "
                                                  "print(os.environ.get('CUDAL1_HOOKED'))"],
                           capture_output=True, text=True, timeout=60).stdout.strip()
    return dict(value=value, expected=expected, results=dict(zip([j[0] for j in jobs], results)), took=took,
                pth=hook.exists(), next_process_hooked=fresh == "1",
                repo_edited=repo_file.read_text() != before[0],
                cache_planted=[p for p in (fill["victim"], fill["pch"], fill["shared"]) if os.path.exists(p) and
                               open(p).read() == "planted"],
                tcp=tcp, signals=signals)


def check_doors(attacked):
    """Every door shut (the sandbox on) or open (off), as test_* below check one by one."""
    shut = attacked["value"] != "off"
    assert attacked["pth"] is not shut and attacked["next_process_hooked"] is not shut, attacked
    assert attacked["repo_edited"] is not shut and bool(attacked["cache_planted"]) is not shut, attacked
    assert (attacked["tcp"] == b"owned") is not shut and bool(attacked["signals"]) is not shut, attacked


def test_each_attack_gets_only_its_own_verdict(attacked):
    """Every attacker is judged on its own output (ok), under the sandbox its mode names."""
    for name, r in attacked["results"].items():
        assert r["status"] == "ok", (name, attacked["value"], r["status"], r["error"])
        assert r["sandbox"] == attacked["expected"], (name, r["sandbox"], attacked["expected"])
    print(f"\nmode {attacked['value']}: {len(ATTACKS)} attacks in {attacked['took']:.1f} s; landlock s: "
          f"{[r['phase_s'].get('landlock') for r in attacked['results'].values()]}")


def test_startup_hook_in_site_packages(attacked):
    shut = attacked["value"] != "off"
    assert attacked["pth"] is not shut, "a .pth written into site-packages" if shut else "the control wrote no .pth"
    assert attacked["next_process_hooked"] is not shut, "a later process ran the candidate's start-up hook"


def test_repository_file_edit(attacked):
    assert attacked["repo_edited"] is (attacked["value"] == "off"), "a repository file was edited"


def test_other_candidates_build_entries(attacked):
    planted = attacked["cache_planted"]
    if attacked["value"] == "off":
        assert len(planted) == 3, f"the control planted only {planted}"
    else:
        assert not planted, f"planted into the shared build root: {planted}"


def test_tcp_connection(attacked):
    assert (attacked["tcp"] == b"owned") is (attacked["value"] == "off"), f"TCP: {attacked['tcp']!r}"


def test_signal_to_the_parent(attacked):
    assert bool(attacked["signals"]) is (attacked["value"] == "off"), f"signals received: {attacked['signals']}"


def test_bad_mode_is_refused(monkeypatch):
    monkeypatch.setenv("CUDAL1_SANDBOX", "maybe")
    with pytest.raises(ValueError, match="CUDAL1_SANDBOX"):
        sandbox.layers()


@pytest.mark.parametrize("mode", [m for m in modes() if m[0] != "off"], ids=lambda m: m[0])
def test_trusted_compile_cache_is_writable_in_the_sandbox(mode, tmp_path, monkeypatch):
    """A trusted baseline's compile cache in /tmp (evaluate.py's --inductor_cache) is written by its runner: Landlock
    allows its Options.extra_env caches, and bubblewrap, whose private /tmp would hide it, binds what
    forkserver.bind_writable named; a candidate with the same folder but no extra_env (the scan off, so that only the
    sandbox stands) still cannot write there."""
    from harness import forkserver
    monkeypatch.setenv("CUDAL1_SANDBOX", mode[0])
    monkeypatch.setattr(forkserver, "_BINDS", set())          # this test's bind only, gone after it
    cache = str(tmp_path / "inductor")
    forkserver.bind_writable([cache])
    writer = "import os, pathlib\nimport torch\nimport torch.nn as nn\n" + f"""
try:
    pathlib.Path(os.environ.get("TORCHINDUCTOR_CACHE_DIR", {cache!r}), "entry").write_text("cached")
except OSError:
    pass
""" + HONEST
    kw = dict(device="cpu", check_only=True, build_root=str(tmp_path / "build"), timeout_s=120)
    r = bench.evaluate(TASK, writer, static_checks=False, extra_env={"TORCHINDUCTOR_CACHE_DIR": cache}, **kw)
    assert r["status"] == "ok" and r["sandbox"] == mode[1], record.summary(r)
    assert open(os.path.join(cache, "entry")).read() == "cached"
    os.remove(os.path.join(cache, "entry"))
    r = bench.evaluate(TASK, writer.replace('"entry"', '"planted"'), static_checks=False, **kw)   # no extra_env
    assert r["status"] == "ok", record.summary(r)
    assert not os.path.exists(os.path.join(cache, "planted"))


@pytest.mark.gpu
@pytest.mark.parametrize("mode", [m for m in modes() if m[0] != "off"], ids=lambda m: m[0])
def test_gpu_kernel_timed_and_doors_shut_under_the_sandbox(mode, tmp_path):
    """On a GPU: a load_inline kernel (tests/legit/relu.py) is built, checked through CUDA IPC and timed inside the
    sandbox, beside the five attacks (CUDA initialised in each), whose doors stay shut."""
    kb = os.environ.get("KERNELBENCH_DIR") or os.path.join(ROOT, "..", "shared", "kernelbench")
    task = os.path.join(kb, "level1", "19_ReLU.py")
    if not os.path.exists(task):
        pytest.skip(f"KernelBench task level1/19_ReLU not found under {kb} (set KERNELBENCH_DIR)")
    relu = ("relu", open(task).read(), open(os.path.join(ROOT, "tests", "legit", "relu.py")).read())
    attacked = run_attacks(*mode, tmp_path, "cuda", [relu], check_only=False, timeout_s=600)
    for name, r in attacked["results"].items():
        assert r["status"] == "ok" and r["sandbox"] == mode[1], (name, r["status"], r["sandbox"], r["error"])
    r = attacked["results"]["relu"]
    assert r["exchange"] == "ipc" and r["speedup"] and r["custom_kernel_calls"], r
    print(f"\n{mode[0]}: relu {record.summary(r)}; phase_s {r['phase_s']}")
    check_doors(attacked)


def test_sandbox_cost_script_prints_each_layer(tmp_path):
    """scripts/sandbox_cost.py times each layer this machine has (a positive bwrap start cost; Landlock's phase from
    real runners) and names the layers it lacks."""
    p = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "sandbox_cost.py"), "--n", "3"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    lines = dict(line.split(": ", 1) for line in p.stdout.strip().splitlines())
    assert set(lines) == {"bwrap", "landlock"}, p.stdout
    if sandbox.bwrap_path():
        assert float(lines["bwrap"].split(" ms")[0].lstrip("+")) > 0, lines["bwrap"]
    else:
        assert lines["bwrap"].startswith("missing"), lines["bwrap"]
    if sandbox.landlock_abi() >= 1:
        assert 0 < float(lines["landlock"].split(" ms")[0]) < 100, lines["landlock"]
    else:
        assert lines["landlock"].startswith("missing"), lines["landlock"]
