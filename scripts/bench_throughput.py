"""Throughput of bench.evaluate_many vs plain torch load_inline.

    python scripts/bench_throughput.py --out results/bench/throughput.json [--n 64] [--plain 3]

1. `--n` distinct one-kernel candidates (the same ReLU kernel with a different constant each, so every source
   hash and build is distinct) on a small ReLU task (4096 x 4096 randn floats; small on purpose, so the batch
   measures bench's own overhead), evaluated end to end with ONE evaluate_many call into a fresh build cache:
   parallel builds, then one timed evaluation per GPU at a time.
   It prints when the builds landed (first, median, last `done` marker) and when main.cpp's precompiled header did.
   `--warm_header`: that header is made in the fresh cache and bench's fork server started BEFORE the clock starts
   (their times printed apart), as every RL step after the first finds them (the header is made once per build
   folder, flag set and torch version, the server once per process); the default counts both.
2. `--fresh` (3) fresh single-candidate compiles through bench's cache, one after another (new sources; the
   precompiled headers already warm, as after an earlier evaluation): bench.build's compile_s, the median quoted, and
   each one's ninja steps (main.cpp, glue.cpp, cuda.cu, the link) from its .ninja_log. Alone, a build is split
   (batch.split_builds); a batch that fills the build cores is not. `--n 0` measures only these.
3. Plain torch.utils.cpp_extension.load_inline, default flags, on `--plain` fresh candidates (default 0: skipped),
   one after another, each in its own process (what a naive evaluator does); the sequential time for --n
   candidates is EXTRAPOLATED from their mean (building 64 that way takes ~30-50 min), and says so.
Prints one summary line (against the targets: the batch under 60 s on one H200 + 16 cores, median process start
under 0.5 s, a fresh one-kernel build under 4 s) and writes everything to --out (JSON).
"""
import argparse, json, os, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import bench  # noqa: E402
import torch  # noqa: E402
from harness import batch, buildcache, forkserver  # noqa: E402

TASK = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(4096, 4096)]


def get_init_inputs():
    return []
'''
CUDA = r"""
__global__ void relu_kernel_K(const float* __restrict__ x, float* __restrict__ y, long long n) {
    const float zero = 0.0f * K.0f;                  // K makes every candidate a distinct source
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > zero ? x[i] : zero;
}
void relu_launch_K(const float* x, float* y, long long n) {
    if (n > 0) relu_kernel_K<<<(unsigned)((n + 255) / 256), 256>>>(x, y, n);
}
"""
CPP = r"""
void relu_launch_K(const float* x, float* y, long long n);
torch::Tensor relu_K(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    relu_launch_K(xc.data_ptr<float>(), y.data_ptr<float>(), xc.numel());
    return y;
}
"""


def candidate(k, tag="tp"):
    return (f"import torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\n\n"
            f"CUDA_SRC = r'''{CUDA.replace('K', str(k))}'''\nCPP_SRC = r'''{CPP.replace('K', str(k))}'''\n"
            f"ext = load_inline(name='{tag}_relu_{k}', cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC, "
            f"functions=['relu_{k}'])\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
            f"        return ext.relu_{k}(x)\n")


def plain_load_inline(k, workdir):
    """Seconds for one plain load_inline (default flags, fresh build directory), in a fresh process."""
    code = (f"import time, torch\nfrom torch.utils.cpp_extension import load_inline\nt0 = time.time()\n"
            f"m = load_inline(name='plain_relu_{k}', cpp_sources={CPP.replace('K', str(k))!r}, "
            f"cuda_sources={CUDA.replace('K', str(k))!r}, functions=['relu_{k}'], build_directory={workdir!r})\n"
            f"print('SECONDS', time.time() - t0)\n")
    t0 = time.time()
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900)
    wall = time.time() - t0
    line = [x for x in p.stdout.splitlines() if x.startswith("SECONDS")]
    return dict(rc=p.returncode, build_s=float(line[0].split()[1]) if line else None, process_s=wall,
                error=(p.stderr[-1500:] if p.returncode else ""))


def ninja_steps(root, module_prefix):
    """{output: seconds} of the build folder whose module starts with module_prefix, from ninja's .ninja_log (lines:
    start ms, end ms, mtime, output, hash): main.o, cuda.cuda.o and the .so's link; {} when not found."""
    for d in os.listdir(root):
        log = os.path.join(root, d, ".ninja_log")
        if os.path.exists(log) and any(f.startswith(module_prefix) for f in os.listdir(os.path.join(root, d))):
            steps = {}
            for line in open(log):
                f = line.rstrip("\n").split("\t")
                if len(f) == 5 and not line.startswith("#"):
                    steps[f[3] if not f[3].endswith(".so") else "link .so"] = round((int(f[1]) - int(f[0])) / 1e3, 2)
            return steps
    return {}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON file for every figure and result")
    ap.add_argument("--n", type=int, default=64, help="distinct candidates in the evaluate_many batch")
    ap.add_argument("--plain", type=int, default=0, help="plain load_inline builds to time (then extrapolate)")
    ap.add_argument("--fresh", type=int, default=3, help="fresh one-kernel builds after the batch (median quoted)")
    ap.add_argument("--build_workers", type=int, default=0, help="0 = bench's default (CPUs less 2 per GPU)")
    ap.add_argument("--time_budget_s", type=float, default=0.3, help="bench's time_budget_s for each candidate (s)")
    ap.add_argument("--warm_header", action="store_true",
                    help="make main.cpp's precompiled header and start bench's fork server before the clock starts "
                         "(as an RL step after the first finds them)")
    a = ap.parse_args()
    a.warm_header = a.warm_header or a.n == 0         # the fresh builds below find the header made, as in an RL run
    tag = f"tp{int(time.time()) % 100000}"            # fresh sources on every run: nothing cached from before
    root = tempfile.mkdtemp(prefix="bench_tp_")
    out = dict(n=a.n, cpus=batch.cpu_count(), gpus=torch.cuda.device_count(), build_root=root)

    jobs = [(f"relu_{k}", TASK, candidate(k, tag)) for k in range(a.n)]
    # as bench.evaluate_many decides: a batch that fills the build cores is not split (nor are its headers made)
    workers = a.build_workers or max(1, batch.cpu_count() - 2 * max(1, out["gpus"]))
    out["split_builds"] = batch.split_builds(a.n, workers)
    if a.warm_header:                                 # the header(s) an earlier batch would have left in the cache
        t = time.time()
        out["warm_header_dir"] = buildcache.prebuild_pch(root, with_cuda=True, split=out["split_builds"])
        out["warm_header_s"] = round(time.time() - t, 1)
        assert out["warm_header_dir"], "--warm_header: no precompiled header was made (no GCC or CUDA_HOME?)"
        print(f"precompiled header made before the clock in {out['warm_header_s']} s (--warm_header)",
              file=sys.stderr, flush=True)
        out["warm_server_s"] = round(forkserver.start(), 1)
        print(f"bench's fork server started before the clock in {out['warm_server_s']} s (--warm_header)",
              file=sys.stderr, flush=True)
    if a.n:                                          # (--n 0: only the fresh builds below)
        t0 = time.time()
        def seen(i, r):      # each evaluation's wall and phases as it lands: a run cut by a time limit still tells
            print(f"[tp] {time.time() - t0:.1f} s: {jobs[i][0]} {r['status']} eval {r.get('eval_s') or 0:.2f} s "
                  f"compile {r.get('compile_s') or 0:.1f} s phases {r.get('phase_s')}", file=sys.stderr, flush=True)
        res = bench.evaluate_many(jobs, device="cuda", build_root=root, build_workers=a.build_workers or None,
                                  time_budget_s=a.time_budget_s, progress=True, on_result=seen)
        out["batch_s"] = time.time() - t0
        out["batch_eval_s"] = sum(r["eval_s"] or 0 for r in res)
        out["batch_ok"] = sum(r["status"] == "ok" for r in res)
        out["statuses"] = {s: sum(r["status"] == s for r in res) for s in {r["status"] for r in res}}
        out["results"] = res
        phases = {}                                     # where an evaluation's wall time goes (bench's phase_s)
        for r in res:
            for k, v in (r.get("phase_s") or {}).items():
                phases.setdefault(k, []).append(v)
        out["phase_median_s"] = {k: sorted(v)[len(v) // 2] for k, v in phases.items()}
        out["eval_wall_median_s"] = sorted(r["eval_s"] or 0 for r in res)[len(res) // 2]
        out["start_median_s"] = out["phase_median_s"].get("start")
        print(f"median phases of one evaluation (s): {out['phase_median_s']}; "
              f"median eval wall {out['eval_wall_median_s']:.1f} s",
              file=sys.stderr, flush=True)

        # when the batch's builds landed (each build folder's `done` marker) and when main.cpp's precompiled header did
        # (one build makes it for all; builds that start before it exists compile main.cpp without it)
        since = lambda p: round(os.path.getmtime(p) - t0, 1)
        done = sorted(since(os.path.join(root, d, "done")) for d in os.listdir(root)
                      if os.path.exists(os.path.join(root, d, "done")))
        gch = [os.path.join(r, f) for r, _, fs in os.walk(os.path.join(root, "pch")) for f in fs if f.endswith(".gch")]
        out["pch_ready_s"] = min(map(since, gch)) if gch else None
        out["builds_done_s"] = done
        if done:
            print(f"builds done at {done[0]} s (first), {done[len(done) // 2]} s (median), {done[-1]} s (last); "
                  f"precompiled header ready at {out['pch_ready_s']} s", file=sys.stderr, flush=True)

    # fresh one-kernel builds one after another (nothing else running), each one's ninja steps from its .ninja_log;
    # alone, a build is split (batch.split_builds): its two headers made first, outside the clock, as an earlier
    # single evaluation would have left them
    if a.fresh:
        t = time.time()
        buildcache.prebuild_pch(root, with_cuda=True, split=True)
        out["fresh_headers_s"] = round(time.time() - t, 1)
        print(f"the split build's headers made in {out['fresh_headers_s']} s (outside the clock)", file=sys.stderr,
              flush=True)
    fresh = []
    for j in range(a.fresh):
        b = bench.build(candidate(10 ** 6 + j, tag), device="cuda", build_root=root)
        b["ninja_steps_s"] = ninja_steps(root, f"{tag}_relu_{10 ** 6 + j}")
        fresh.append(b)
        print(f"fresh build {j + 1}/{a.fresh}: {b['status']} {b['compile_s'] or float('nan'):.2f} s; ninja steps (s): "
              f"{b['ninja_steps_s']}", file=sys.stderr, flush=True)
    ok_s = sorted(b["compile_s"] for b in fresh if b["status"] == "ok" and b["compile_s"])
    out["fresh_builds"] = fresh
    out["cached_fresh_compile_s"] = ok_s[len(ok_s) // 2] if ok_s else None      # the median
    out["cached_fresh_status"] = [b["status"] for b in fresh]

    plain = []
    with tempfile.TemporaryDirectory() as d:
        for k in range(a.plain):
            wd = os.path.join(d, f"plain{k}")
            os.makedirs(wd)
            plain.append(plain_load_inline(10 ** 7 + k, wd))
            print(f"[plain] load_inline {k + 1}/{a.plain}: {plain[-1]}", file=sys.stderr, flush=True)
    ok = [p["build_s"] for p in plain if p["rc"] == 0 and p["build_s"]]
    out["plain"] = plain
    out["plain_mean_s"] = sum(ok) / len(ok) if ok else None
    out["plain_sequential_extrapolated_s"] = out["plain_mean_s"] * a.n if ok else None
    ratio = out["plain_mean_s"] / out["cached_fresh_compile_s"] if ok and out["cached_fresh_compile_s"] else None
    out["single_compile_speedup"] = ratio
    print(f"SUMMARY throughput: {a.n} distinct candidates end to end with evaluate_many: {out.get('batch_s', 0):.1f} s "
          f"({out.get('batch_ok', 0)}/{a.n} ok; {out['cpus']} CPUs, {out['gpus']} GPU(s)"
          + (f"; header made and fork server started before the clock in {out['warm_header_s']} s and "
             f"{out.get('warm_server_s')} s" if a.warm_header else "; header and fork server start counted")
          + "); median process start "
          f"{out.get('start_median_s') or float('nan'):.3f} s; fresh single compile "
          f"{out['cached_fresh_compile_s'] or float('nan'):.2f} s (median of {len(ok_s)})"
          + (f"; plain sequential load_inline {out['plain_mean_s']:.1f} s each (mean of {len(ok)}), EXTRAPOLATED "
             f"x{a.n} = {out['plain_sequential_extrapolated_s'] / 60:.1f} min ({ratio:.1f}x slower per build)"
             if ok and ratio else "")
          + " (targets: batch < 60 s, start < 0.5 s, fresh build <= 4 s)")
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    json.dump(out, open(a.out, "w"), indent=1, default=str)


if __name__ == "__main__":
    main()
