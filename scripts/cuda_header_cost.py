"""What a CUDA source's own `#include <torch/extension.h>` costs nvcc, and whether buildcache.lighten_cuda's variant
(torch/types.h only, which load_inline puts on top anyway) still compiles. No GPU needed.

    python scripts/cuda_header_cost.py --kernels=../shared/cudal1_release/a100.json --n=3

Takes the first `n` kernels of the file whose CUDA source includes torch/extension.h and that lighten_cuda accepts;
captures their load_inline arguments in a child process with a stub loader (importing the candidate, then making
its ModelNew on the meta device for calls made in __init__, as bench's builds ahead do); compiles each cuda.cu as
the build cache writes it, as written and lightened, with `nvcc -c` for `--arch` and torch's include folders.
Prints per kernel: seconds and exit status of both compiles; then the totals. Compile-only: nothing is linked or run.
"""
import json
import os
import subprocess
import sys
import sysconfig
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from harness import buildcache
import common
from evaluation import taskset

# -----------------------------------------------------------------------------
kernels = ""        # a kernels file (this project's rows or the CUDA-L1 release format)
n = 3               # kernels to compile (each twice)
arch = "sm_90"      # nvcc -arch
# -----------------------------------------------------------------------------

_PROBE = r"""
import json, sys, types, torch
from torch.utils import cpp_extension
calls = []
def stub(*a, **kw):
    calls.append(dict(zip(["name", "cpp_sources", "cuda_sources"], a), **kw))
    raise RuntimeError("stub")
cpp_extension.load_inline = stub
task, cand = types.ModuleType("task"), types.ModuleType("cand")
exec(compile(sys.argv[1], "task.py", "exec"), task.__dict__)
try:
    exec(compile(sys.argv[2], "candidate.py", "exec"), cand.__dict__)
    with torch.device("meta"):
        cand.ModelNew(*task.get_init_inputs())
except BaseException:
    pass
print("PROBE" + json.dumps([c.get("cuda_sources") for c in calls], default=repr))
"""


def main():
    common.configure(globals())
    assert kernels and os.path.exists(kernels), f"--kernels: no such file {kernels!r}"
    incs = [f"-I{d}" for d in buildcache.cpp_extension.include_paths() + [sysconfig.get_paths()["include"]]]
    done, tot = 0, [0.0, 0.0]
    for row in taskset.read_kernels(kernels):
        if done >= n or not row["code"] or "torch/extension.h" not in row["code"]:
            continue
        with tempfile.TemporaryDirectory() as cwd:     # candidates write folders into their cwd: not ours
            p = subprocess.run([sys.executable, "-c", _PROBE, row["ref_code"] or "", row["code"]], cwd=cwd,
                               capture_output=True, text=True, timeout=300)
        srcs = [s for s in json.loads(p.stdout.split("PROBE", 1)[1]) if s] if "PROBE" in p.stdout else []
        cuda = "\n".join(s if isinstance(s, str) else "\n".join(s) for s in srcs[:1])
        light = buildcache.lighten_cuda(cuda) if cuda else None
        if not light:
            continue
        row_t = []
        with tempfile.TemporaryDirectory() as d:
            for tag, text in (("as written", cuda), ("lightened", light)):
                path = os.path.join(d, f"{tag[:2]}.cu")
                open(path, "w").write("\n".join(buildcache._FULL_PRELUDE + [text]))
                t0 = time.time()
                r = subprocess.run(["nvcc", "-std=c++17", f"-arch={arch}", "-c", path, "-o", path + ".o", *incs],
                                   capture_output=True, text=True, timeout=900)
                row_t.append((time.time() - t0, r.returncode))
        print(f"{row['task']}: as written {row_t[0][0]:.1f} s (rc {row_t[0][1]}), lightened {row_t[1][0]:.1f} s "
              f"(rc {row_t[1][1]})", flush=True)
        if row_t[0][1] == 0:
            done += 1
            tot = [tot[0] + row_t[0][0], tot[1] + row_t[1][0]]
    print(f"SUMMARY {done} kernels that compile as written: {tot[0]:.1f} s as written, {tot[1]:.1f} s lightened")


if __name__ == "__main__":
    main()
