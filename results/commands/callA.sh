# Call A: bench hack suite (GPU1, first ~4 min) || tiny prepare+SFT (GPU0) -> RL ablation ex2 (GPU0) / ex0 (GPU1)
export KERNELBENCH_DIR=$PWD/.kb/kernelbench CUDAL1_SAMPLE_DIR=$PWD/.kb/cudal1_sample PYTHONUNBUFFERED=1
nvidia-smi -L; python -c "import torch,transformers;print(torch.__version__,transformers.__version__)"
A=results/tiny/ablation; mkdir -p $A results/bench
( CUDA_VISIBLE_DEVICES=1 timeout 280 python -m pytest -q -s -rA -m gpu tests/test_bench_gpu.py -k "not legit and not cudal1 and not protocols and not degenerate" > results/bench/gpu_hacks.log 2>&1; echo "hacks rc=$?" ) &
T0=$(date +%s)
CUDA_VISIBLE_DEVICES=0 python prepare.py --preset=tiny --out_dir=out/tiny_base > $A/prepare.log 2>&1; echo "prepare rc=$? $(( $(date +%s)-T0 ))s"
CUDA_VISIBLE_DEVICES=0 python sft.py --preset=tiny --out_dir=out/tiny_base > $A/sft.log 2>&1; echo "sft rc=$? $(( $(date +%s)-T0 ))s"
tail -5 $A/prepare.log; tail -3 $A/sft.log
for n in 2 0; do rm -rf out/tiny_ex$n; cp -r out/tiny_base out/tiny_ex$n; done
wait  # hacks done before RL takes GPU1
echo "hacks done $(( $(date +%s)-T0 ))s"; tail -15 results/bench/gpu_hacks.log
LEFT=$(( 545 - ($(date +%s)-T0) )); echo "RL budget ${LEFT}s"
CUDA_VISIBLE_DEVICES=0 timeout -k 30 -s INT $LEFT python rl.py --preset=tiny --num_exemplars=2 --out_dir=out/tiny_ex2 --run_evaluate=False > $A/ex2_console.log 2>&1 &
CUDA_VISIBLE_DEVICES=1 timeout -k 30 -s INT $LEFT python rl.py --preset=tiny --num_exemplars=0 --out_dir=out/tiny_ex0 --run_evaluate=False > $A/ex0_console.log 2>&1 &
wait; echo "rl done $(( $(date +%s)-T0 ))s"
for n in 2 0; do cp out/tiny_ex$n/rl/log.jsonl $A/ex${n}_log.jsonl; cp out/tiny_ex$n/rl/curves.png $A/ex${n}_curves.png; gzip -c out/tiny_ex$n/rl/samples.jsonl > $A/ex${n}_samples.jsonl.gz; tail -3 $A/ex${n}_console.log; done
python scripts/compare_runs.py $A/curves.png ex2=$A/ex2_log.jsonl ex0=$A/ex0_log.jsonl | tee $A/compare.txt
python scripts/steps_per_hour.py $A/ex2_log.jsonl $A/ex0_log.jsonl | tee $A/steps_per_hour.txt
tar czf $OUT/callA.tgz results/bench results/tiny/ablation
