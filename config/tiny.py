# The walking-skeleton proof on one GPU: python rl.py --preset=tiny
# prepare (measure the project-written kernels of 4 KernelBench level-1 tasks) -> sft (a tiny Llama from scratch)
# -> rl (GRPO on real H200 timings) -> evaluate (before and after RL, against eager). One preset for every stage:
# each stage reads the keys it knows. Paths are absolute so any working directory works.
import os as _os
out_dir = "out/tiny"
# prepare
levels = "1"
task_names = "level1/25_Swish,level1/30_Softsign,level1/36_RMSNorm_,level1/38_L1Norm_"
if _stage == "prepare":
    split = "paper"  # 4 tasks: train on them and evaluate on them
variants_dir = _os.path.join(common.ROOT, "data", "tiny_cuda")
sft_prompts_per_variant = 6
gpu = "h200"
device = "cuda"
arch = "9.0"
gpu_name = "NVIDIA H200"
num_correct_trials = 3
time_budget_s = 1.0
timeout_s = 240.0
# sft
init_from = "tiny"
vocab_size = 4096
n_layer = 2
n_embd = 128
n_head = 4
max_len = 4096
batch_size = 8
max_iters = 400
lr = 4e-3
min_lr = 4e-4
warmup_iters = 20
eval_interval = 100
log_interval = 50
dtype = "float32"
# rl
num_prompts = 4
num_generations = 8
max_completion_length = 1024
temperature = 0.8  # fewer mutated (mostly broken, each costing a build) kernels per step
max_steps = 12  # the whole demo in about 7 minutes on one H200; at 16 steps it took over 9, and the runs were
                # already near the best seed kernel (0.77-0.96 of it) by step 9-11
save_interval = 5
micro_batch_size = 8
gen_batch_size = 32
rollout_engine = "generate"  # a 2-layer policy: compiling a static-cache decode step would cost more than it saves
beta = 0.1  # a k3 KL to the SFT model keeps Adam's per-weight steps from erasing what SFT taught: at beta=0,
           # lr=2e-3 the tiny policy collapsed into unparseable text within 5 steps (tiny_cpu), and at beta=0.04,
           # lr=1e-3 the GPU run drifted into broken kernels
if _stage == "rl":
    lr = 5e-4
prepare_if_missing = True
run_evaluate = True
# evaluate (the tiny model only knows the contrastive prompt; exemplars from rl.py's database)
prompt = "contrastive"
baselines = "eager"  # torch.compile's baseline is evaluate.py's default, not the demo's: on a fresh H200 its
                     # warm-up alone took longer than the demo's 8 minutes
num_samples = 6  # answers per task and model (before and after RL): 24 per model; the gap between the two on an
                 # H200 is several standard errors wide at this size, and each distinct kernel costs about 5 s
