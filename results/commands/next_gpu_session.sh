# The GPU measurements issues 11-14 still owe. Session 8 of 2026-12-01 (results/bench/2026-12-01_s8/COMMANDS.md):
# D finished in 417 s on a fresh H200 (done: results/tiny/h200/demo_2026-12-01_s8*). The GPU suite ran twice:
# judge_clock_shave got ~1.39x both times (its 0.76 ms shave read 0.49 ms, limit 0.5 ms) and once the legitimate
# docstring_autocast_half was named clock_mismatch (1.88 ms of excess beside 14 builds). Fixed since on the CPU side
# only: cores.core_split keeps 2 cores for the timed side (runner under the GPU's lock, judge, the parent's timing
# thread) and builds off them; a second draw's clock check pools both draws, and every clock_mismatch under 20x
# its limit gets that second draw (was 3x). So, in this order:
#  - A: the whole GPU suite; every CLOCK line (excess vs limit) is the evidence; judge_clock_shave must be named and
#    every legit case accepted. If the shave still reads near its limit, look at the CLOCK lines of the honest 2.7 ms
#    GEMM cases (their spread is the noise the limit must clear).
#  - B: level3/45 (its build alone took 194 s), and re-measure level1/86 and level3/49 (fixed evaluator false
#    negatives): case B0 does it all (copies the committed audit, drops those rows, runs B) in a call of its own
#    (never after A in one call: their timeouts add to more than 600 s); untar what it returns into out/ and carry
#    out/cudal1_a100_audit for a further B.
#  - C (throughput, repeatability, timing table, precision calibration), then E: rl_scale's float32 generation of
#    8 x 8 x 2048 tokens on the 0.5B model alone took over 135 s: give 0.5b a call of its own, then 1.5b.
#  - F (reward_norm / async ablations), and the 15-minute from-scratch audit of issue 12 (B into an empty eval_dir).
# Each case is one call of <= 10 min from the repository root, with KernelBench and the CUDA-L1
# files copied into .kb/ (carry .kb). Chain the calls: a call made within 30 s of the last one finds the machine warm
# (no start, and its build cache is still there). On nvidia-h200-x2 run two cases at once, one per GPU, each under
# `taskset` with 16 CPUs of its own, as results/commands/call1_2026-12-01_s3.sh does.
# Every step has its own timeout that leaves time for the final tar.
set -o pipefail
export KERNELBENCH_DIR=$PWD/.kb/kernelbench CUDAL1_SAMPLE_DIR=$PWD/.kb/cudal1_sample PYTHONUNBUFFERED=1
mkdir -p $OUT/r
case "$1" in
A)  # issue 11 + 12: the whole GPU suite once more after session 4's fixes (15% overhead slack in the clock check,
    # builds in ModelNew.__init__ made ahead, gemm_div_sum in float64): all 79 cases in one run (461 s in session 4)
    timeout -k 10 560 python -m pytest -v -s -rA --durations=20 -p no:cacheprovider -m gpu tests/test_bench_gpu.py > $OUT/r/gpu_suite.log 2>&1
    ;;
B0) # B from the committed audit, with the rows of $REDO (default: the two fixed false negatives) dropped first so
    # that they are measured again; a later B call carries out/cudal1_a100_audit untarred from what B0 returned
    rm -rf out/cudal1_a100_audit && mkdir -p out && cp -r results/cudal1_a100_audit out/
    REDO=${REDO:-level1/86,level3/49} python - <<'PY'
import json, os
redo = set(os.environ["REDO"].split(","))
for f in ("results.jsonl", "kernels.jsonl"):
    p = os.path.join("out/cudal1_a100_audit", f)
    rows = [l for l in open(p) if l.strip()]
    keep = [l for l in rows if json.loads(l).get("task") not in redo]
    print(f, len(rows), "->", len(keep), "rows")
    open(p, "w").writelines(keep)
PY
    bash "$0" B
    ;;
B)  # issue 11 item 5 + issue 12 item 4: the CUDA-L1 A100 release. Session 4 measured 138 of 225 kernels in two runs
    # (results/cudal1_a100_audit). To finish it: copy that folder to out/cudal1_a100_audit, carry it, run B (again,
    # carrying what came back, until evaluate.py prints its summary). For the 15-minute figure of issue 12, run it
    # from scratch into an empty --eval_dir instead; its builds are the bottleneck (50-170 s each, 14 at once).
    timeout -k 20 540 python evaluate.py --kernels=.kb/cudal1_release/a100.json --baselines=eager \
        --screen_degenerate=False --eval_dir=out/cudal1_a100_audit > $OUT/r/audit_eval.log 2>&1
    python scripts/audit_cudal1.py --eval_dir=out/cudal1_a100_audit --kernels=.kb/cudal1_release/a100.json \
        > $OUT/r/audit.txt 2>&1
    tar czf $OUT/r/audit.tgz out/cudal1_a100_audit
    ;;
C)  # issue 12: throughput, repeatability, timing table; issue 11: the precision calibration to the end
    timeout -k 5 100 python scripts/bench_throughput.py --n 64 --out $OUT/r/throughput.json > $OUT/r/throughput.log 2>&1
    timeout -k 5 80 python scripts/bench_repeat.py --out $OUT/r/repeat.json > $OUT/r/repeat.log 2>&1
    timeout -k 5 40 python scripts/timing_accuracy.py --out $OUT/r/timing_accuracy.json > $OUT/r/timing.log 2>&1
    timeout -k 5 300 python scripts/precision_calibration.py --device=cuda \
        --sample=.kb/cudal1_sample/a100_sample.jsonl --out $OUT/r/precision.md > $OUT/r/precision.log 2>&1
    ;;
D)  # issue 14 + issue 12 item 5: the main command on one GPU (wall time); issue 13 item 5 (rl_scale printed nothing
    # in 225 s in session 3: give it a call of its own, 1.5B first)
    # each output line stamped with the wall clock (the stage times rl.py prints are the figure; these locate them)
    /usr/bin/time -v timeout -k 5 575 python rl.py --preset=demo 2>&1 | \
        while IFS= read -r l; do printf '%(%T)T %s\n' -1 "$l"; done > $OUT/r/demo.log
    tar czf $OUT/r/demo.tgz out/tiny/rl/log.jsonl out/tiny/rl/curves.png out/tiny/rl/samples* out/tiny/eval/summary.md \
        out/tiny/eval/results.jsonl out/tiny/seed.jsonl
    ;;
E)  timeout -k 10 540 python scripts/rl_scale.py --models=${MODELS:-0.5b} --out=$OUT/r/rl_scale.jsonl > $OUT/r/rl_scale.log 2>&1
    ;;
F)  # issue 13 items 2 and 6: the reward_norm and async_rollouts ablations on the tiny preset (resumable)
    timeout -k 20 540 bash scripts/ablate_reward_norm.sh > $OUT/r/ablate_reward_norm.log 2>&1
    tar czf $OUT/r/ablate.tgz out/ablate_reward_norm
    ;;
esac
tar czf $OUT/r.tgz -C $OUT r
