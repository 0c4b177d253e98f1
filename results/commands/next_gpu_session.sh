# The GPU measurements issues 11-14 still owe. Session 7 of 2026-12-01 (30 min of device time, commit 6e2a822) ran D,
# A and B twice (results/bench/2026-12-01_s7/COMMANDS.md): A 80 of 80 passed; the audit reached 248 of 250 lines;
# the demo did not finish (9 min 25 s, stopped in evaluate). Fixed since on the CPU side only, so run first:
#  - D: every compile error of an RL sample was built two or three times (buildcache retried with torch's headers
#    for any error) -> only an undeclared name / missing header of the failing unit is retried now. Run D again: the
#    demo must finish under 8 min; rl.py prints each stage's wall time; rl/samples.jsonl has each new kernel's
#    eval_s / phase_s (keep them in the tar).
#  - A: new legit file tests/legit/channels_last_output.py (outputs delivered as stored, judge.as_stored) and the
#    fp32-reference rescue (judge.mismatches_vs64): run A again.
#  - B: level1/84 and level3/45 never reached; level1/86 and level3/49 are fixed evaluator false negatives to
#    re-measure: rm -rf out/cudal1_a100_audit && cp -r results/cudal1_a100_audit out/, drop the rows of level1/86
#    and level3/49 from its results.jsonl and kernels.jsonl, carry it, run B. For issue 12's 15-minute figure run B
#    from scratch into an empty --eval_dir (phase_s.models still reached 97 s for level1/50: find out why).
#  - then C (throughput, repeatability, timing table, precision calibration), E (rl_scale), F (ablations).
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
E)  timeout -k 10 540 python scripts/rl_scale.py --models=1.5b,0.5b --out=$OUT/r/rl_scale.jsonl > $OUT/r/rl_scale.log 2>&1
    ;;
F)  # issue 13 items 2 and 6: the reward_norm and async_rollouts ablations on the tiny preset (resumable)
    timeout -k 20 540 bash scripts/ablate_reward_norm.sh > $OUT/r/ablate_reward_norm.log 2>&1
    tar czf $OUT/r/ablate.tgz out/ablate_reward_norm
    ;;
esac
tar czf $OUT/r.tgz -C $OUT r
