# The walking skeleton without a GPU (CI): python rl.py --preset=tiny_cpu
# Same chain as config/tiny.py, on 3 project-written CPU tasks (data/tiny_cpu/tasks) whose kernels are PyTorch
# variants of different speed, so nothing is compiled and the whole run takes a few minutes on 2 cores.
import os as _os
out_dir = "out/tiny_cpu"
# prepare
kernelbench_dir = _os.path.join(common.ROOT, "data", "tiny_cpu", "tasks")
task_names = ""
split = "paper"
variants_dir = _os.path.join(common.ROOT, "data", "tiny_cpu")
sft_prompts_per_variant = 6
gpu = "cpu"
device = "cpu"
arch = ""
gpu_name = "CPU"
num_correct_trials = 2
time_budget_s = 0.3
timeout_s = 120.0
build_workers = 2
# sft
init_from = "tiny"
vocab_size = 2048
n_layer = 2
n_embd = 96
n_head = 4
max_len = 2048
batch_size = 8
max_iters = 150
lr = 3e-3
min_lr = 3e-4
warmup_iters = 15
eval_interval = 50
log_interval = 25
dtype = "float32"
# rl
num_prompts = 3
num_generations = 6
max_completion_length = 512
temperature = 1.0
max_steps = 8
save_interval = 4
micro_batch_size = 6
gen_batch_size = 18
if _stage == "rl":
    lr = 5e-4
prepare_if_missing = True
run_evaluate = True
# evaluate
baselines = "eager"
num_samples = 2
