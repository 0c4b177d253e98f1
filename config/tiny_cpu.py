# The walking skeleton without a GPU (CI): python rl.py --preset=tiny_cpu
# Same chain as config/tiny.py, on 3 project-written CPU tasks (data/tiny_cpu/tasks) whose kernels are PyTorch
# variants of different speed, so nothing is compiled and the whole run takes a few minutes on 2 cores.
import os as _os
out_dir = "out/tiny_cpu"
# prepare
kernelbench_dir = _os.path.join(common.ROOT, "data", "tiny_cpu", "tasks")
task_names = ""
levels = "0"  # prepare.py gives the tasks of a flat folder level 0
if _stage == "prepare":
    split = "paper"  # train on every task and evaluate on them
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
n_embd = 128
n_head = 4
max_len = 2048
batch_size = 8
max_iters = 300
lr = 4e-3
min_lr = 4e-4
warmup_iters = 20
eval_interval = 100
log_interval = 50
dtype = "float32"
# rl
num_prompts = 3
num_generations = 6
max_completion_length = 512
temperature = 0.8  # fewer mutated (mostly broken, each costing a build) kernels per step
max_steps = 24
save_interval = 4
micro_batch_size = 6
gen_batch_size = 18
beta = 0.1  # a k3 KL to the SFT model keeps Adam's per-weight steps from erasing what SFT taught: at beta=0,
           # lr=2e-3 the tiny policy collapsed into unparseable text within 5 steps (tiny_cpu), and at beta=0.04,
           # lr=1e-3 the H200 run drifted into broken kernels (results/tiny/h200/rl_run1_*)
if _stage == "rl":
    lr = 5e-4
prepare_if_missing = True
run_evaluate = True
# evaluate (the tiny model only knows the contrastive prompt; exemplars from rl.py's database)
prompt = "contrastive"
baselines = "eager"
num_samples = 2
