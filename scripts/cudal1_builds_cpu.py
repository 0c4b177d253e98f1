"""Which CUDA-L1 kernels' load_inline builds compile, on a machine without a GPU (nvcc and torch's headers only), to
check the audit's "its extension never ran" and "build fails" lines (scripts/audit_cudal1.py) without device time.

    python scripts/cudal1_builds_cpu.py --kernels=../shared/cudal1_release/a100.json \
        --audit=results/cudal1_a100_audit/audit.csv --cause="never ran" --out=results/cudal1_a100_audit/builds_cpu.txt

For each release line whose audit cause contains `cause` (or each of `lines`), a child process installs bench's
build cache (the same light/full preludes as on the GPU), imports the candidate and makes its ModelNew on the meta
device (so builds in __init__ run, as bench's builds ahead do; torch.cuda.is_available() is made to say True, since
many build only then), and reports the builds that failed. With a CPU build of torch nothing CUDA can be linked (no
libc10_cuda) and some CUDA headers are missing, so a build failing only there is "compiles as far as a CPU machine
can tell"; any other compiler error is the kernel's own. Prints one line per kernel: line, task, verdict, seconds, first
error. Builds go to a temporary folder, not the shared cache.
"""
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import common  # noqa: E402
from evaluation import taskset  # noqa: E402

# -----------------------------------------------------------------------------
kernels = ""        # a CUDA-L1 release file (one JSON object a line)
audit = ""          # audit_cudal1.py's audit.csv, to pick lines by cause
cause = "never ran"  # pick the lines whose audit cause contains this text
lines = ""          # or a comma list of release line numbers (1-based); overrides audit/cause
arch = "9.0"        # TORCH_CUDA_ARCH_LIST for nvcc
timeout_s = 900     # per kernel
out = ""            # also write the lines here
# -----------------------------------------------------------------------------

_CHILD = r"""
import json, os, sys, types, torch
sys.path.insert(0, sys.argv[3])
from torch.utils import cpp_extension
if cpp_extension.CUDA_HOME is None:       # a CPU build of torch does not look for the toolkit
    import shutil
    nvcc = shutil.which("nvcc")
    cpp_extension.CUDA_HOME = os.environ.get("CUDA_HOME") or (os.path.dirname(os.path.dirname(os.path.realpath(nvcc)))
                                                             if nvcc else None)
torch.cuda.is_available = lambda: True   # kernels that build only "if torch.cuda.is_available()" build here too
from harness import buildcache
buildcache.install_build_cache()
calls = [0]
_load = cpp_extension.load_inline
def counted(*a, **kw):
    calls[0] += 1
    return _load(*a, **kw)
cpp_extension.load_inline = counted
task, cand = types.ModuleType("task"), types.ModuleType("cand")
exec(compile(sys.argv[1], "task.py", "exec"), task.__dict__)
err = None
try:
    exec(compile(sys.argv[2], "candidate.py", "exec"), cand.__dict__)
    with torch.device("meta"):
        cand.ModelNew(*task.get_init_inputs())
except BaseException as e:
    err = f"{type(e).__name__}: {e}"[:300]
print("RESULT" + json.dumps(dict(failures=buildcache.BUILD_FAILURES, error=err, calls=calls[0])))
"""


_NOT_HERE = ("cannot find -l", "ld returned", "undefined reference",      # linking CUDA needs a CUDA build of torch
             "cuda.h: No such file", "cuda_runtime.h: No such file", "cuda/")   # ... and so do some CUDA headers


def verdict(failures, calls):
    if not calls:
        return "no load_inline call reached (import or ModelNew() on the meta device stopped first)", ""
    if not failures:
        return "builds", ""
    if not any(re.search(r"error\s*[:(]|fatal|undefined", f) for f in failures):
        return "fails, its compiler output not captured (a verbose=True build prints it to stdout)", ""
    own = [f for f in failures if not any(x in f for x in _NOT_HERE)]
    if not own:
        return "compiles as far as a CPU machine can tell (its error needs a CUDA build of torch)", \
            failures[0].replace("\n", " | ")[:200]
    return "does not compile", own[0].replace("\n", " | ")[:400]


def main():
    common.configure(globals())
    assert kernels and os.path.exists(kernels), f"--kernels: no such file {kernels!r}"
    rows = list(taskset.read_kernels(kernels))
    if lines:
        pick = [int(x) for x in lines.split(",") if x.strip()]
    else:
        assert audit and os.path.exists(audit), f"--audit: no such file {audit!r} (or give --lines)"
        pick = [int(a["line"]) for a in csv.DictReader(open(audit)) if cause in a["cause"]]
    env = dict(os.environ, TORCH_CUDA_ARCH_LIST=arch, PYTHONUNBUFFERED="1")
    report = []
    for n in pick:
        row = rows[n - 1]
        build = tempfile.mkdtemp(prefix="cudal1_builds_")
        t0 = time.time()
        with tempfile.TemporaryDirectory() as cwd:     # candidates write into their cwd: not ours
            try:
                p = subprocess.run([sys.executable, "-c", _CHILD, row["ref_code"] or "", row["code"] or "", ROOT],
                                   cwd=cwd, env=dict(env, CUDAL1_BUILD_ROOT=build), capture_output=True, text=True,
                                   timeout=timeout_s)
                got = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT")]
                res = json.loads(got[-1][6:]) if got else dict(failures=[], error=f"no result: {p.stderr[-300:]}",
                                                                                calls=0)
            except subprocess.TimeoutExpired:
                res = dict(failures=[f"timeout after {timeout_s} s"], error=None, calls=1)
        shutil.rmtree(build, ignore_errors=True)
        v, first = verdict(res["failures"], res.get("calls", 0))
        line = f"line {n} {row['task']}: {v} ({time.time() - t0:.0f} s)" + (f": {first}" if first else "")
        if res.get("error") and not res["failures"]:
            line += f"; ModelNew() on meta: {res['error']}"
        print(line, flush=True)
        report.append(line)
    if out:
        with open(out, "w") as f:
            f.write(f"# python scripts/cudal1_builds_cpu.py --kernels={kernels} " +
                    (f"--lines={lines}" if lines else f"--audit={audit} --cause='{cause}'") + f" --arch={arch}\n")
            f.write("\n".join(report) + "\n")


if __name__ == "__main__":
    main()
