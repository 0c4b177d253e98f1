# Stage 2 of the tiny run (CUDA-L1 self-training, sft.py --self_train): after `python prepare.py --preset=tiny` and
# `python sft.py --preset=tiny`, run `python sft.py --preset=tiny_self_train`. config/tiny.py's settings, plus:
import os as _os
exec(open(_os.path.join(common.ROOT, "config", "tiny.py")).read())
self_train = True
self_train_rounds = 2
self_train_samples = 4  # K per task (4 tasks: 16 samples per round)
self_train_iters = 50
lr = 1e-3  # fine-tuning an SFT model: a smaller step than training from scratch
min_lr = 1e-4
warmup_iters = 5
max_new_tokens = 1024
temperature = 0.8
gen_batch_size = 16
