# Call 3 (2026-11-30): the KernelBench L1-L3 baselines table on both GPUs of the 2x H200 machine (32 CPUs), stopped
# by its own timeout (SIGTERM: evaluate.py writes the report of what it measured), then packed into one file.
export KERNELBENCH_DIR=$PWD/.kb/kernelbench PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=2
timeout -k 40 430 python evaluate.py --kernelbench_dir=$KERNELBENCH_DIR --levels=1,2,3 --baselines=eager,compile,compile_reduce_overhead,cuda_graph --eval_dir=results/h200_baselines --compile_workers=16 --time_budget_s=1.0 > results/h200_baselines.log 2>&1; echo "rc=$?"
tar czf $OUT/call3.tgz results/h200_baselines results/h200_baselines.log
