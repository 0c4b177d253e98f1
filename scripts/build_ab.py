"""Fresh one-kernel builds with build-setting variants taken in turn, on this machine (issue 12 item 3).

    python scripts/build_ab.py [--rounds 4] [--out results/bench/build_ab.json]

The variants are environment settings buildcache reads at every build: default (gold where installed, main.cpp with
-pipe), CUDAL1_PIPE=0 (no -pipe), CUDAL1_FAST_LD=0 (the compiler's default linker). Each round builds one new source
per variant, in turn, so that a slower moment of the machine hits every variant alike; each build's ninja steps
(main.o, cuda.cuda.o, the link) come from its .ninja_log. The builds run in this process through
buildcache.cached_load_inline, main.cpp's precompiled header made first (as an RL step after the first finds it).
Prints the median of each variant and writes every build to --out (JSON).
"""
import argparse, json, os, statistics, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import buildcache  # noqa: E402
from bench_throughput import CPP, CUDA, ninja_steps  # noqa: E402

VARIANTS = {"default": {}, "no_pipe": {"CUDAL1_PIPE": "0"}, "ld_default": {"CUDAL1_FAST_LD": "0"}}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=4, help="builds per variant, taken in turn")
    ap.add_argument("--out", default=None, help="JSON file for every build (optional)")
    a = ap.parse_args()
    root = tempfile.mkdtemp(prefix="build_ab_")
    os.environ["CUDAL1_BUILD_ROOT"] = root
    t = time.time()
    assert buildcache.prebuild_pch(root, with_cuda=True), "no precompiled header (no GCC or CUDA_HOME?)"
    print(f"precompiled header made in {time.time() - t:.1f} s", flush=True)
    rows, tag = [], f"ab{int(time.time()) % 100000}"
    for r in range(a.rounds):
        for v, env in VARIANTS.items():
            k = len(rows)
            old = {n: os.environ.get(n) for n in env}
            os.environ.update(env)
            t = time.perf_counter()
            buildcache.cached_load_inline(f"{tag}_relu_{k}", CPP.replace("K", str(k)), CUDA.replace("K", str(k)),
                                          functions=[f"relu_{k}"])
            s = time.perf_counter() - t
            for n, x in old.items():
                os.environ.pop(n) if x is None else os.environ.__setitem__(n, x)
            rows.append(dict(variant=v, round=r, build_s=round(s, 3), steps=ninja_steps(root, f"{tag}_relu_{k}_")))
            print(f"round {r + 1} {v:10s} {s:.2f} s {rows[-1]['steps']}", flush=True)
    for v in VARIANTS:
        b = [x["build_s"] for x in rows if x["variant"] == v]
        m = [x["steps"].get("main.o") for x in rows if x["variant"] == v and x["steps"].get("main.o")]
        ln = [x["steps"].get("link .so") for x in rows if x["variant"] == v and x["steps"].get("link .so")]
        print(f"SUMMARY {v:10s} build median {statistics.median(b):.2f} s (min {min(b):.2f}, max {max(b):.2f}); "
              f"main.o median {statistics.median(m):.2f} s; link median {statistics.median(ln):.2f} s", flush=True)
    if a.out:
        json.dump(rows, open(a.out, "w"), indent=1)


if __name__ == "__main__":
    main()
