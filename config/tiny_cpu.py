# The walking skeleton without a GPU (CI): python rl.py --preset=tiny_cpu
# config/tiny.py's chain on 3 project-written CPU tasks (data/tiny_cpu/tasks) whose kernels are PyTorch variants of
# different speed, so nothing is compiled and the whole run takes a few minutes on 2 cores.
import os as _os
exec(open(_os.path.join(common.ROOT, "config", "tiny.py")).read())
out_dir = "out/tiny_cpu"
# prepare
kernelbench_dir = _os.path.join(common.ROOT, "data", "tiny_cpu", "tasks")
task_names = ""
levels = "0"  # prepare.py gives the tasks of a flat folder level 0
variants_dir = _os.path.join(common.ROOT, "data", "tiny_cpu")
sft_prompts_per_variant = 12  # each exemplar pair of a task twice with each kernel as the answer (6 pairs, 6
                              # kernels; rmsnorm: 3 pairs, 4 times), so the SFT model writes every kernel after any
                              # prompt and RL can find the fastest (with 4 random pairs per kernel, some pairs never
                              # led to the fastest kernel, and RL settled on a slower one)
gpu = "cpu"
device = "cpu"
arch = ""
gpu_name = "CPU"  # the prompt of the CPU task (prompting.py): PyTorch or C++, timed on the CPU
num_correct_trials = 2
time_budget_s = 0.3
timeout_s = 120.0
build_workers = 2
# sft: shorter kernels than the CUDA ones
vocab_size = 2048
max_len = 2048
max_iters = 300
# rl: CPU timings are noisier, so more, smaller steps
num_prompts = 3
num_generations = 6
max_completion_length = 512
max_steps = 24
save_interval = 4
micro_batch_size = 6
gen_batch_size = 18
# evaluate: the SFT model (before RL) and the RL model on the same prompts, every answer counted
baselines = "eager"
num_samples = 16  # answers per task and model: 48 per model, enough that before vs after RL is stable
