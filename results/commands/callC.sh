# Call C: RL on 2 GPUs (DDP) -> stage-2 self-training (GPU0) || SFT speed/memory + GPU tests of sft/prepare/evaluate (GPU1)
export KERNELBENCH_DIR=$PWD/.kb/kernelbench CUDAL1_SAMPLE_DIR=$PWD/.kb/cudal1_sample CUDAL1_SAMPLE=$PWD/.kb/cudal1_sample/a100_sample.jsonl PYTHONUNBUFFERED=1
D=results/tiny/ddp; R=results/tiny/stage2; mkdir -p $D $R results/sft_speed; T0=$(date +%s)
[ -f out/tiny_base/sft/config.json ] && echo "out/tiny_base kept" || { python prepare.py --preset=tiny --out_dir=out/tiny_base > $D/prepare.log 2>&1; python sft.py --preset=tiny --out_dir=out/tiny_base > $D/sft.log 2>&1; }
rm -rf out/tiny_ddp out/tiny_s2; cp -r out/tiny_base out/tiny_ddp; cp -r out/tiny_base out/tiny_s2
timeout -k 30 -s INT 170 torchrun --nproc_per_node=2 rl.py --preset=tiny --num_exemplars=2 --out_dir=out/tiny_ddp --run_evaluate=False --max_steps=8 > $D/console.log 2>&1; echo "ddp rc=$? $(( $(date +%s)-T0 ))s"
cp out/tiny_ddp/rl/log.jsonl $D/log.jsonl; cp out/tiny_ddp/rl/curves.png $D/curves.png; tail -4 $D/console.log
python scripts/steps_per_hour.py results/tiny/ablation/ex2_log.jsonl $D/log.jsonl | tee $D/steps_per_hour.txt
( CUDA_VISIBLE_DEVICES=0 timeout -s INT $(( 530 - ($(date +%s)-T0) )) python sft.py --preset=tiny_self_train --self_train_samples=3 --out_dir=out/tiny_s2 > $R/self_train.log 2>&1; echo "self_train rc=$? $(( $(date +%s)-T0 ))s"
  cp out/tiny_s2/self_train/{log.jsonl,summary.json,kept.jsonl} $R/ 2>/dev/null; grep -E "^round|success rate per round" $R/self_train.log ) &
( export CUDA_VISIBLE_DEVICES=1
  timeout 150 python scripts/sft_speed.py --models=0.5b,1.5b --seq_len=4096 --batch_size=1 --iters=10 --out=results/sft_speed/h200_T4096_B1.json > results/sft_speed/h200_T4096_B1.log 2>&1; echo "speed rc=$? $(( $(date +%s)-T0 ))s"; grep -v Warn results/sft_speed/h200_T4096_B1.log | tail -6
  timeout $(( 520 - ($(date +%s)-T0) )) python -m pytest -q -rA -m gpu tests/test_sft_gpu.py tests/test_prepare_import.py tests/test_evaluate.py tests/test_rl_vllm.py > $R/gpu_tests.log 2>&1; echo "gpu tests rc=$? $(( $(date +%s)-T0 ))s"; tail -12 $R/gpu_tests.log ) &
wait
tar czf $OUT/callC.tgz results/tiny/ddp results/tiny/stage2 results/sft_speed
