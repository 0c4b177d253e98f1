# Call B: bench legit suite, repeatability, throughput (GPU0) || CUDA-L1 samples vs all baselines, H200 baselines table (GPU1)
export KERNELBENCH_DIR=$PWD/.kb/kernelbench CUDAL1_SAMPLE_DIR=$PWD/.kb/cudal1_sample PYTHONUNBUFFERED=1
mkdir -p results/bench; T0=$(date +%s)
( export CUDA_VISIBLE_DEVICES=0
  timeout 260 python -m pytest -q -s -rA -m gpu tests/test_bench_gpu.py -k "legit or cudal1 or protocols or degenerate" > results/bench/gpu_legit.log 2>&1; echo "legit rc=$? $(( $(date +%s)-T0 ))s"
  timeout 100 python scripts/bench_repeat.py --out results/bench/repeat.json > results/bench/repeat.log 2>&1; echo "repeat rc=$? $(( $(date +%s)-T0 ))s"
  timeout $(( 540 - ($(date +%s)-T0) )) python scripts/bench_throughput.py --n 24 --plain 1 --out results/bench/throughput.json > results/bench/throughput.log 2>&1; echo "throughput rc=$? $(( $(date +%s)-T0 ))s" ) &
( export CUDA_VISIBLE_DEVICES=1 TORCHINDUCTOR_COMPILE_THREADS=2
  timeout 300 python evaluate.py --kernels=$CUDAL1_SAMPLE_DIR/a100_sample.jsonl --baselines=eager,compile,compile_reduce_overhead,cuda_graph,cudnn_benchmark --out_dir=results/cudal1_sample_h200 --eval_dir=results/cudal1_sample_h200 --build_workers=8 --compile_workers=8 --screen_degenerate=False > results/cudal1_sample_h200.log 2>&1; echo "cudal1 rc=$? $(( $(date +%s)-T0 ))s"
  timeout $(( 540 - ($(date +%s)-T0) )) python evaluate.py --kernelbench_dir=$KERNELBENCH_DIR --levels=1,2,3 --baselines=eager,compile,compile_reduce_overhead,cuda_graph --out_dir=results/h200_baselines --eval_dir=results/h200_baselines --compile_workers=8 > results/h200_baselines.log 2>&1; echo "baselines rc=$? $(( $(date +%s)-T0 ))s" ) &
wait
for f in results/bench/gpu_legit.log results/bench/repeat.log results/bench/throughput.log results/cudal1_sample_h200.log results/h200_baselines.log; do echo "== $f"; tail -25 $f; done
tar czf $OUT/callB.tgz results/bench results/cudal1_sample_h200* results/h200_baselines*
