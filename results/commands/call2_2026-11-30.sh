# Call 2 (2026-11-30), everything written straight to $OUT. GPU0 + CPUs 0-15 (the 16-core box of issue 6):
# throughput benchmark, hack suite, then H200 baselines. GPU1 + CPUs 16-31: CUDA-L1 samples vs all baselines, legit suite.
export KERNELBENCH_DIR=$PWD/.kb/kernelbench CUDAL1_SAMPLE_DIR=$PWD/.kb/cudal1_sample PYTHONUNBUFFERED=1
T0=$(date +%s); O=$OUT; mkdir -p $O/bench; left() { echo $(( $1 - ($(date +%s)-T0) )); }
A="taskset -c 0-15"; B="taskset -c 16-31"; command -v taskset >/dev/null || { A=""; B=""; }
( export CUDA_VISIBLE_DEVICES=0
  timeout -k 10 300 $A python scripts/bench_throughput.py --n 64 --plain 2 --out $O/bench/throughput.json > $O/bench/throughput.log 2>&1; echo "throughput rc=$? $(( $(date +%s)-T0 ))s"
  timeout -k 10 $(left 450) $A python -m pytest -q -s -rA -m gpu tests/test_bench_gpu.py -k "hack" > $O/bench/gpu_hacks.log 2>&1; echo "hacks rc=$? $(( $(date +%s)-T0 ))s"
  timeout -k 30 $(left 520) $A python evaluate.py --kernelbench_dir=$KERNELBENCH_DIR --levels=1,2,3 --baselines=eager,compile,compile_reduce_overhead,cuda_graph --eval_dir=$O/h200_baselines --compile_workers=8 --time_budget_s=1.0 > $O/h200_baselines.log 2>&1; echo "baselines rc=$? $(( $(date +%s)-T0 ))s" ) &
( export CUDA_VISIBLE_DEVICES=1
  python results/commands/plain_l1_5.py > $O/bench/cudal1_L1_5_plain_load_inline.log 2>&1 &
  timeout -k 30 300 $B python evaluate.py --kernels=$CUDAL1_SAMPLE_DIR/a100_sample.jsonl --baselines=eager,compile,compile_reduce_overhead,cuda_graph,cudnn_benchmark --eval_dir=$O/cudal1_sample_h200 --compile_workers=8 --screen_degenerate=False > $O/cudal1_sample_h200.log 2>&1; echo "cudal1 rc=$? $(( $(date +%s)-T0 ))s"
  timeout -k 10 $(left 540) $B python -m pytest -q -s -rA -m gpu tests/test_bench_gpu.py -k "legit or cudal1 or protocols or degenerate" > $O/bench/gpu_legit.log 2>&1; echo "legit rc=$? $(( $(date +%s)-T0 ))s"; wait ) &
wait
for f in $O/bench/throughput.log $O/bench/gpu_legit.log $O/cudal1_sample_h200.log $O/bench/gpu_hacks.log $O/h200_baselines.log $O/bench/cudal1_L1_5_plain_load_inline.log; do echo "== $f"; tail -6 $f | cut -c1-300; done
