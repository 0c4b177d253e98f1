# Stage 2 of the CPU tiny run: `python sft.py --preset=tiny_cpu_self_train` after prepare.py and sft.py with
# --preset=tiny_cpu (tests/test_sft_selftrain.py runs this chain). config/tiny_cpu.py's settings, plus:
import os as _os
exec(open(_os.path.join(common.ROOT, "config", "tiny_cpu.py")).read())
self_train = True
self_train_rounds = 2
self_train_samples = 3  # K per task (3 tasks: 9 samples per round)
self_train_iters = 20
lr = 1e-3
min_lr = 1e-4
warmup_iters = 5
max_new_tokens = 512
temperature = 0.8
gen_batch_size = 9
