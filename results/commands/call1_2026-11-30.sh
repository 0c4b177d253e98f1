# Call 1 (2026-11-30): GPU0 + CPUs 0-15 (the 16-core H200 box of issue 6): throughput benchmark, then H200 baselines
#                     GPU1 + CPUs 16-31: legit suite + CUDA-L1 + protocols + degenerate screen, CUDA-L1 samples vs all baselines, hack suite
export KERNELBENCH_DIR=$PWD/.kb/kernelbench CUDAL1_SAMPLE_DIR=$PWD/.kb/cudal1_sample PYTHONUNBUFFERED=1
mkdir -p results/bench; T0=$(date +%s); nvidia-smi -L; nproc
A="taskset -c 0-15"; B="taskset -c 16-31"; command -v taskset >/dev/null || { A=""; B=""; }
( export CUDA_VISIBLE_DEVICES=0
  timeout 330 $A python scripts/bench_throughput.py --n 64 --plain 2 --out results/bench/throughput.json > results/bench/throughput.log 2>&1; echo "throughput rc=$? $(( $(date +%s)-T0 ))s"
  timeout $(( 578 - ($(date +%s)-T0) )) $A python evaluate.py --kernelbench_dir=$KERNELBENCH_DIR --levels=1,2,3 --baselines=eager,compile,compile_reduce_overhead,cuda_graph --out_dir=results/h200_baselines --eval_dir=results/h200_baselines --compile_workers=8 --time_budget_s=1.0 > results/h200_baselines.log 2>&1; echo "baselines rc=$? $(( $(date +%s)-T0 ))s" ) &
( export CUDA_VISIBLE_DEVICES=1
  python results/commands/plain_l1_5.py > results/bench/cudal1_L1_5_plain_load_inline.log 2>&1 &
  timeout 300 $B python -m pytest -q -s -rA -m gpu tests/test_bench_gpu.py -k "legit or cudal1 or protocols or degenerate" > results/bench/gpu_legit.log 2>&1; echo "legit rc=$? $(( $(date +%s)-T0 ))s"
  timeout 200 $B python evaluate.py --kernels=$CUDAL1_SAMPLE_DIR/a100_sample.jsonl --baselines=eager,compile,compile_reduce_overhead,cuda_graph,cudnn_benchmark --out_dir=results/cudal1_sample_h200 --eval_dir=results/cudal1_sample_h200 --compile_workers=8 --screen_degenerate=False > results/cudal1_sample_h200.log 2>&1; echo "cudal1 rc=$? $(( $(date +%s)-T0 ))s"
  timeout $(( 578 - ($(date +%s)-T0) )) $B python -m pytest -q -s -rA -m gpu tests/test_bench_gpu.py -k "hack" > results/bench/gpu_hacks_new.log 2>&1; echo "hacks rc=$? $(( $(date +%s)-T0 ))s"; wait ) &
wait
for f in results/bench/throughput.log results/bench/gpu_legit.log results/cudal1_sample_h200.log results/bench/gpu_hacks_new.log results/h200_baselines.log results/bench/cudal1_L1_5_plain_load_inline.log; do echo "== $f"; tail -12 $f | cut -c1-400; done
tar czf $OUT/call1.tgz results/bench results/cudal1_sample_h200* results/h200_baselines*
