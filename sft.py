"""
Stages 1 and 2 of CUDA-L1: supervised fine-tuning on (prompt, response) pairs, in plain PyTorch.

    python sft.py --init_from=Qwen/Qwen2.5-Coder-1.5B-Instruct --data=out/sft.jsonl   # stage 1, a Hugging Face model
    python sft.py --preset=tiny   # stage 1, a tiny model from scratch
    torchrun --nproc_per_node=8 sft.py --init_from=...   # stage 1 on 8 GPUs (DDP)
    python sft.py --preset=tiny --self_train=True --self_train_rounds=2   # stage 2 from out_dir/sft

Stage 1. The loss is next-token cross-entropy on the response tokens (and the EOS that ends them) only: the prompt
is context, not a target (REFERENCE.md §1.1: "(instruction + reference) -> variant"). Prompts go through the
model's chat template when its tokenizer has one (common.render_prompt). On CUDA the forward runs under bf16
autocast with float32 weights and AdamW state (param_dtype="bfloat16" stores the weights in bf16 instead: half the
memory, coarser updates). AdamW with linear warm-up and cosine decay, gradient accumulation, optional gradient
checkpointing, a held-out loss on val_fraction of the rows. Checkpoints (every save_interval iterations, at the end,
and on Ctrl-C) are the Hugging Face format (transformers and vLLM load the folder) plus state.pt (optimizer,
iteration, history, every rank's RNG states), and --resume continues exactly where the checkpoint stopped: the
next loss equals that of an uninterrupted run (tests/test_sft.py, tests/test_sft_interrupt.py). The logged step loss
is the token mean over all micro-batches of the step. init_from="tiny" builds a small Llama from a
config and trains a byte-level BPE tokenizer on the data itself, so nothing is downloaded. Without
pre-tokenisation the BPE merges may cross spaces and newlines (up to max_token_length characters), which keeps
the tiny run's sequences short: about 300 prompt and 100 answer tokens for a 3,000-character kernel.

Multi-GPU: under torchrun every rank holds the whole model wrapped in DistributedDataParallel (common.ddp_setup;
NCCL on CUDA, gloo on CPU); each rank draws its own batches, so the effective batch is
batch_size x grad_accum x world_size. FSDP (sharding a model that does not fit one GPU) is NOT implemented: a model
must fit one GPU with its float32 AdamW state (about 16 bytes per parameter: a 1.5B model takes ~24 GB before
activations, see scripts/sft_speed.py). Ctrl-C / SIGTERM, also under torchrun: the iteration is finished and a
checkpoint saved at its end (train's docstring).

Stage 2 (--self_train=True; CUDA-L1 §1.2 of REFERENCE.md: rejection-sampling fine-tuning, binary reward). Round r:
sample self_train_samples (K) answers per training task (tasks.jsonl split "train") from the current model
(transformers generate, or vLLM with use_vllm=True), take the code (prompting.extract_code), evaluate every distinct
kernel with bench.evaluate_many, keep the successful ones (status "ok"; speed ignored; deduplicated by a hash of
task and code), fine-tune the current model for self_train_iters iterations on all kernels kept so far (the
paper fine-tunes on the successful samples only; self_train_mix_stage1=True adds the stage-1 rows), repeat. A last
measuring round after the final fine-tune (no training) shows the gain: success rate of round 0 = the stage-1
model, of round R = after R rounds. The prompt is the contrastive prompt with self_train_exemplars kernels drawn
from out_dir/db.json (the format prepare.py's SFT data teaches; 0, or no db.json = the paper's stage-1 prompt).
Each round is resumable: its samples and bench results are cached in self_train/round<r>/, a finished round is in
log.jsonl and skipped, an interrupted fine-tune continues from its state.pt. Stage 2 runs as one process.

Output: out_dir/sft (stage 1: model, tokenizer, state.pt, history.json); out_dir/self_train (stage 2):
log.jsonl (one row per round: round, model, samples, ok, success_rate, status fractions, kept_new, kept_total,
times in s), kept.jsonl (every kept sample: task, code, response, round, bench result), round<r>/samples.jsonl
(every sample with its status) and round<r>/model (the model after round r's fine-tune), summary.json.
"""
import contextlib
import hashlib
import math
import os
import random
import sys
import time

import torch
import torch.nn.functional as F

import common

import prompting

# -----------------------------------------------------------------------------
# config
init_from = "Qwen/Qwen2.5-Coder-1.5B-Instruct"  # HF name or folder, or "tiny" (a model built from the config below)
out_dir = "out"  # the run folder: out_dir/sft (stage 1), out_dir/self_train (stage 2)
data = ""  # JSONL of {prompt, response}; default out_dir/sft.jsonl
# the tiny model (init_from="tiny")
vocab_size = 4096  # BPE vocabulary trained on the data itself
max_token_length = 32  # longest merged token in characters (merges cross spaces and newlines)
n_layer = 2  # transformer layers
n_head = 4  # attention heads
n_embd = 128  # hidden size
block_size = 8192  # longest sequence the model is built for, in tokens
# training
max_len = 4096  # tokens per example; longer prompts are cut from the left
batch_size = 8  # examples per micro-batch and rank
grad_accum = 1  # micro-batches per optimizer step
max_iters = 300  # optimizer steps
lr = 1e-5  # peak learning rate (AdamW)
min_lr = 1e-6  # learning rate at the end of the cosine decay
warmup_iters = 10  # linear warm-up steps
weight_decay = 0.0  # AdamW weight decay
grad_clip = 1.0  # gradient norm clip
val_fraction = 0.1  # share of the rows held out for the validation loss
eval_interval = 50  # validation loss every this many steps
log_interval = 10  # a log line every this many steps
save_interval = 0  # checkpoint every this many iterations (0 = only at the end and on Ctrl-C)
stop_iter = 0  # stop after this iteration with a checkpoint, as an interrupt would; 0 = never
device = "cuda" if torch.cuda.is_available() else "cpu"  # cuda | cpu
dtype = "bfloat16"  # autocast dtype on CUDA ("float32" = no autocast)
param_dtype = "float32"  # weights and AdamW state; "bfloat16" halves their memory
gradient_checkpointing = False  # recompute activations in the backward pass: less memory, ~1.5x the time
resume = False  # continue from out_dir/sft/state.pt
seed = 1337  # data order, split and initial weights
# stage 2: self-training (rejection-sampling fine-tuning)
self_train = False  # run stage 2 instead of stage 1
self_train_rounds = 2  # fine-tuning rounds R; R + 1 sampling rounds (the last one only measures)
self_train_samples = 8  # K answers per training task and round
self_train_tasks = 0  # at most this many training tasks (a fixed random subset); 0 = all
self_train_iters = 100  # fine-tuning iterations per round
self_train_mix_stage1 = False  # also train on the stage-1 rows (the paper: successful samples only)
self_train_exemplars = 2  # exemplars from out_dir/db.json in the prompt; 0 = the stage-1 prompt
self_train_from = ""  # model to start stage 2 from; "" = out_dir/sft
max_new_tokens = 4096  # longest sampled answer, in tokens
temperature = 1.0  # sampling temperature
top_p = 1.0  # nucleus sampling; 1 = off
gen_batch_size = 16  # answers per generate() call
use_vllm = False  # sample with vLLM when installed (common.load_vllm)
gpu_name = "NVIDIA A100"  # the GPU named in the prompt
arch = ""  # TORCH_CUDA_ARCH_LIST for the candidates' nvcc builds
num_correct_trials = 5  # bench's correctness trials per kernel
time_budget_s = 2.0  # bench: seconds the timed calls of one kernel should take
timeout_s = 300.0  # bench: per kernel, build included, s
build_workers = 0  # 0 = one per CPU core
# -----------------------------------------------------------------------------


def train_tokenizer(texts, size, max_chars=32):
    """A byte-level BPE tokenizer trained on `texts` (no download). Any string encodes: the 256 bytes are in it.
    max_chars caps a token's length: uncapped, a corpus of a few dozen kernels turns whole prompts into single
    tokens, and the "model" would only pick among memorised kernels instead of writing them."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=size, special_tokens=["<|endoftext|>", "<|pad|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
                                  max_token_length=max_chars)
    tok.train_from_iterator(texts, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", pad_token="<|pad|>")


def tiny_model(tok):
    """A small Llama (RoPE, so long prompts need no learned positions) sized by the config globals."""
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=n_embd, intermediate_size=4 * n_embd, num_hidden_layers=n_layer,
                      num_attention_heads=n_head, num_key_value_heads=n_head, max_position_embeddings=block_size,
                      bos_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                      tie_word_embeddings=True)
    return LlamaForCausalLM(cfg)


def sft_loss(model, ids, mask, num_tokens=None):
    """Cross-entropy summed over the target tokens (mask == 1) and divided by num_tokens (default: their number here,
    i.e. the mean; a step of several micro-batches passes the step's total, so that the shares add up to the token
    mean of the whole step). ids, mask: (B, T) long; padding has mask 0. Token t predicts token t + 1."""
    logits = model(input_ids=ids).logits  # (B, T, V); right padding needs no attention mask under a causal model
    logits, targets, m = logits[:, :-1].float(), ids[:, 1:], mask[:, 1:].float()  # token t predicts t+1
    nll = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), reduction="none")
    return (nll * m.reshape(-1)).sum() / (m.sum().clamp(min=1.0) if num_tokens is None else num_tokens)


def collate(examples, pad_id, dev):
    """Right-pad a list of (ids, mask) to (B, T) tensors."""
    T = max(len(x) for x, _ in examples)
    ids = torch.full((len(examples), T), pad_id, dtype=torch.long)
    mask = torch.zeros((len(examples), T), dtype=torch.long)
    for i, (x, m) in enumerate(examples):
        ids[i, :len(x)] = torch.tensor(x)
        mask[i, :len(m)] = torch.tensor(m)
    return ids.to(dev), mask.to(dev)


def lr_at(it, total=None):
    """Linear warm-up, then cosine decay from lr to min_lr at `total` iterations (default max_iters)."""
    total = total or max_iters
    if it < warmup_iters:
        return lr * (it + 1) / warmup_iters
    t = min(1.0, (it - warmup_iters) / max(1, total - warmup_iters))
    return min_lr + 0.5 * (1 + math.cos(math.pi * t)) * (lr - min_lr)


enable_checkpointing = common.enable_checkpointing  # moved to common (rl.py uses it too); this name for scripts/


def _dist():
    """(rank, world_size) of the process group torchrun set up, (0, 1) without one."""
    import torch.distributed as dist
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def train(model, tok, rows, save_dir, iters=None):
    """The SFT loop over rows [{prompt, response}] for `iters` optimizer steps (default max_iters); saves the model
    (HF format) and state.pt to save_dir, resumes from there when `resume` is set. Under torchrun every rank calls
    it with the same rows. Returns the history [(iter, train_loss, val_loss)] (val_loss NaN when not measured).

    The loss of a step is the token mean over all its micro-batches (and ranks): each micro-batch's summed
    cross-entropy is divided by the step's total number of target tokens, not averaged as micro-batch means (issue 13).
    Ctrl-C (SIGINT) or SIGTERM at any point of an iteration: the iteration is finished, then a checkpoint is saved at
    that boundary (weights, optimizer, counter, every rank's RNG states all from the same moment) and SystemExit(130)
    is raised, so --resume continues exactly as the uninterrupted run would, and no step is ever applied twice
    (tests/test_sft_interrupt.py). Under torchrun the ranks agree at each boundary whether any rank was signalled.
    A second Ctrl-C quits at once without saving (then --resume continues from the last checkpoint).
    """
    import signal
    import threading
    iters = iters or max_iters
    rank, world = _dist()
    examples = [common.encode_example(tok, r["prompt"], r["response"], max_len) for r in rows]
    rng = random.Random(seed)
    rng.shuffle(examples)  # the same split on every rank
    n_val = int(len(examples) * val_fraction) if len(examples) >= 10 else 0
    val, tr = examples[:n_val], examples[n_val:]
    assert tr, "no training examples"
    if rank:  # each rank draws its own batches (rank 0 goes on with the shuffling generator, as one process does)
        rng = random.Random(seed + rank)
    torch.manual_seed(seed + rank)
    model.to(device).train()
    if gradient_checkpointing:
        enable_checkpointing(model)
    ddp = model
    if world > 1:
        from torch.nn.parallel import DistributedDataParallel
        ddp = DistributedDataParallel(model, device_ids=[torch.device(device).index] if "cuda" in device else None)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay, betas=(0.9, 0.95))
    it, history = 0, []
    state_path = os.path.join(save_dir, "state.pt")
    if resume and os.path.exists(state_path):
        st = torch.load(state_path, weights_only=False, map_location="cpu")
        assert st["world_size"] == world, f"{state_path} was saved by {st['world_size']} ranks, this run has {world}"
        opt.load_state_dict(st["opt"])
        it, history = st["iter"], st["history"]
        rng.setstate(st["py_rng"][rank])
        torch.set_rng_state(st["torch_rng"][rank])
        if rank == 0:
            print(f"resumed at iter {it} from {save_dir}")
    amp = torch.autocast("cuda", dtype=getattr(torch, dtype), enabled="cuda" in device and dtype != "float32")

    def save():
        """Model + tokenizer (HF format) + state.pt; every rank's RNG states so that a resume is exact. Called only
        at iteration boundaries, by every rank (it gathers the RNG states)."""
        py, th = common.ddp_gather(rng.getstate()), common.ddp_gather(torch.get_rng_state())
        if rank == 0:
            os.makedirs(save_dir, exist_ok=True)
            model.save_pretrained(save_dir)
            tok.save_pretrained(save_dir)
            torch.save(dict(opt=opt.state_dict(), iter=it, history=history, py_rng=py, torch_rng=th, world_size=world,
                            config=common.config_keys(globals())), state_path + ".tmp")
            os.replace(state_path + ".tmp", state_path)
            common.write_json_atomic(os.path.join(save_dir, "history.json"), history)
        common.ddp_barrier()

    def val_loss():
        if not val:
            return float("nan")
        model.eval()  # the bare model: no DDP hooks, so rank 0 can do this alone
        with torch.no_grad(), amp:
            losses = [sft_loss(model, *collate(val[i:i + batch_size], tok.pad_token_id, device)).item()
                      for i in range(0, len(val), batch_size)]
        model.train()
        return sum(losses) / len(losses)

    stop = []  # signals received; the loop checks it only at iteration boundaries

    def on_signal(sig, frame):
        if sig == signal.SIGINT and signal.SIGINT in stop:
            raise KeyboardInterrupt
        if not stop and rank == 0:
            print(f"interrupted: finishing iteration {it + 1}, then saving a checkpoint (Ctrl-C again: quit without)",
                  flush=True)
        stop.append(sig)
    main_thread = threading.current_thread() is threading.main_thread()  # signal handlers can only be set there
    handlers = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)} if main_thread else {}
    t0, ntok = time.time(), 0
    try:
        while it < iters:
            for g in opt.param_groups:
                g["lr"] = lr_at(it, iters)
            # the step's micro-batches first: the token mean of the step needs their target-token total (all ranks)
            batches = [collate(rng.sample(tr, min(batch_size, len(tr))), tok.pad_token_id, device)  # (B, T) each
                       for _ in range(grad_accum)]
            n_tgt = torch.stack([m[:, 1:].sum() for _, m in batches]).sum().float()
            if world > 1:
                torch.distributed.all_reduce(n_tgt)
            n_tgt = n_tgt.clamp(min=1.0) / world  # DDP averages the ranks' gradients: undo its 1 / world
            total = 0.0
            for micro, (ids, mask) in enumerate(batches):
                ntok += ids.numel()
                # DDP: all-reduce the gradients only on the last micro-batch
                sync = ddp.no_sync() if (world > 1 and micro < grad_accum - 1) else contextlib.nullcontext()
                with sync:
                    with amp:
                        loss = sft_loss(ddp, ids, mask, num_tokens=n_tgt)
                    loss.backward()
                total += loss.item()
            torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
            opt.step()
            opt.zero_grad(set_to_none=True)
            it += 1
            if it % log_interval == 0 or it == iters:
                if world > 1:  # this rank's share times world: the mean over ranks is the step's token mean
                    t = torch.tensor([total], device=device)
                    torch.distributed.all_reduce(t)
                    total = t.item() / world
                v = val_loss() if rank == 0 and (it % eval_interval == 0 or it == iters) else float("nan")
                history.append((it, total, v))
                if rank == 0:
                    vs = f" | val {v:.4f}" if v == v else ""  # only on evaluation iterations (and with a val set)
                    dt = time.time() - t0
                    print(f"iter {it:5d} | loss {total:.4f}{vs} | lr {lr_at(it, iters):.2e} | "
                          f"{ntok * world / max(dt, 1e-9):.0f} tok/s | {dt:.0f}s", flush=True)
            # an iteration boundary: weights, optimizer, counter, history and RNG states belong to the same moment
            halt = any(common.ddp_gather(bool(stop))) if world > 1 else bool(stop)
            if (save_interval and it % save_interval == 0 and it < iters) or it == stop_iter or halt:
                save()
                if halt:
                    if rank == 0:
                        print(f"saved a checkpoint at iter {it} in {save_dir}" + ("" if os.environ.get("CUDAL1_CHAINED")
                              else "; continue with --resume=True"), flush=True)
                    raise SystemExit(130)
                if it == stop_iter:
                    if rank == 0:
                        print(f"stop_iter={stop_iter}: checkpoint saved, resume with --resume=True")
                    return history
    except KeyboardInterrupt:
        print(f"rank {rank}: stopped at once, no checkpoint written; --resume continues from the last one")
        raise SystemExit(130)
    finally:
        for sig, h in handlers.items():
            signal.signal(sig, h)
    save()
    return history


# -----------------------------------------------------------------------------
# Stage 2

def sha(*parts):
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def load_model_for_training(path):
    """common.load_model with this script's param_dtype; SystemExit with the cause when it cannot be loaded."""
    try:
        return common.load_model(path, dtype=param_dtype)
    except RuntimeError as e:
        raise SystemExit(f"error: {e}")


def sample_round(model_dir, model, tok, tasks, db, rng):
    """K answers per task from the model; returns [{task, prompt, text, truncated, code, format_error}]."""
    prompts = []
    for t in tasks:
        good = db.get(t["name"], [])
        ex = rng.sample(good, min(self_train_exemplars, len(good))) if self_train_exemplars else []
        prompts.append(prompting.contrastive_prompt(t["src"], [(e["code"], e["speedup"]) for e in ex], gpu_name))
    if use_vllm and common.vllm_available():
        llm = common.load_vllm(model_dir, seed=rng.randrange(2 ** 31))
        gens = common.vllm_generate(llm, tok, prompts, self_train_samples, max_new_tokens, temperature, top_p)
        del llm
    else:
        if use_vllm:
            print("use_vllm=True but vllm is not installed: sampling with transformers generate")
        model.to(device)
        gens = list(common.generate(model, tok, prompts, self_train_samples, max_new_tokens, temperature, top_p,
                                    batch_size=gen_batch_size))
    out = []
    for i, g in enumerate(gens):
        t, p = tasks[i // self_train_samples], prompts[i // self_train_samples]
        code, err = prompting.extract_code(g["text"])
        out.append(dict(task=t["name"], prompt=p, text=g["text"], truncated=g["truncated"], code=code,
                        format_error=err))
    return out


def self_train_run(stage1_rows):
    """Stage 2: the rounds described in the module docstring. Returns the log rows (one per round)."""
    import bench
    st_dir = os.path.join(out_dir, "self_train")
    os.makedirs(st_dir, exist_ok=True)
    tasks_path = os.path.join(out_dir, "tasks.jsonl")
    if not os.path.exists(tasks_path):
        raise SystemExit(f"error: no task set {tasks_path}: run prepare.py first")
    tasks = [t for t in common.read_jsonl(tasks_path) if t.get("split") == "train"]
    if not tasks:
        raise SystemExit(f"error: no tasks with split 'train' in {tasks_path}")
    if self_train_tasks and len(tasks) > self_train_tasks:
        tasks = sorted(random.Random(seed).sample(tasks, self_train_tasks), key=lambda t: t["name"])
    db_path = os.path.join(out_dir, "db.json")
    db = common.json.load(open(db_path)) if os.path.exists(db_path) else {}
    start = self_train_from or os.path.join(out_dir, "sft")
    if not os.path.exists(os.path.join(start, "config.json")) and not self_train_from:
        raise SystemExit(f"error: no stage-1 model in {start}: run sft.py first or give --self_train_from=MODEL")
    log_path, kept_path = os.path.join(st_dir, "log.jsonl"), os.path.join(st_dir, "kept.jsonl")
    log = common.read_jsonl(log_path) if os.path.exists(log_path) else []
    done = {h["round"] for h in log}
    bench_dev = "cuda" if device.startswith("cuda") else "cpu"
    print(f"self-training: {len(tasks)} tasks x {self_train_samples} samples, {self_train_rounds} rounds, from {start}")
    for r in range(self_train_rounds + 1):
        rdir = os.path.join(st_dir, f"round{r}")
        model_in = start if r == 0 else os.path.join(st_dir, f"round{r - 1}", "model")
        if r in done:
            continue
        os.makedirs(rdir, exist_ok=True)
        kept = {}  # every kept sample so far, by hash of (task, code); file order = round order
        for k in (common.read_jsonl(kept_path) if os.path.exists(kept_path) else []):
            if k["round"] < r:
                kept.setdefault(k["key"], k)
        model, tok = load_model_for_training(model_in)
        rng = random.Random(seed * 1000 + r)
        torch.manual_seed(seed * 1000 + r)
        t0 = time.time()
        # 1. sample (cached: a rerun of an interrupted round reuses its samples and bench results)
        samples_path = os.path.join(rdir, "samples.jsonl")
        if os.path.exists(samples_path):
            samples = common.read_jsonl(samples_path)
        else:
            samples = sample_round(model_in, model, tok, tasks, db, rng)
            t1 = time.time()
            # 2. evaluate every distinct kernel once
            src = {t["name"]: t["src"] for t in tasks}
            jobs = {sha(s["task"], s["code"]): (s["task"], src[s["task"]], s["code"]) for s in samples if s["code"]}
            results = dict(zip(jobs, bench.evaluate_many(
                list(jobs.values()), device=bench_dev, arch=arch or None, num_correct_trials=num_correct_trials,
                time_budget_s=time_budget_s, timeout_s=timeout_s, build_workers=build_workers or None,
                progress=True)))
            for s in samples:
                res = results.get(sha(s["task"], s["code"])) if s["code"] else None
                s.update(key=sha(s["task"], s["code"]) if s["code"] else None, result=res,
                         status=res["status"] if res else "format_error", speedup=res and res.get("speedup"))
            s_tmp = samples_path + ".tmp"
            with open(s_tmp, "w") as f:
                for s in samples:
                    f.write(common.json.dumps(s) + "\n")
            os.replace(s_tmp, samples_path)
            print(f"round {r}: sampled in {t1 - t0:.0f}s, evaluated {len(jobs)} distinct kernels in "
                  f"{time.time() - t1:.0f}s")
        t2 = time.time()
        # 3. keep the successful ones (binary reward: speed ignored), new ones only
        new = []
        for s in samples:
            if s["status"] == "ok" and s["key"] not in kept:
                k = dict(key=s["key"], task=s["task"], round=r, code=s["code"], prompt=s["prompt"],
                         response=s["text"], speedup=s["speedup"], result=s["result"])
                kept[s["key"]] = k
                new.append(k)
        if os.path.exists(kept_path):  # drop rows of this round left by an interrupted run, then append
            old = [k for k in common.read_jsonl(kept_path) if k["round"] < r]
            with open(kept_path + ".tmp", "w") as f:
                for k in old:
                    f.write(common.json.dumps(k) + "\n")
            os.replace(kept_path + ".tmp", kept_path)
        for k in new:
            common.append_jsonl(kept_path, k)
        # 4. fine-tune on all kept samples (not after the last, measuring round)
        n = len(samples)
        frac = lambda k: sum(s["status"] == k for s in samples) / max(n, 1)
        h = dict(round=r, model=model_in, samples=n, ok=sum(s["status"] == "ok" for s in samples),
                 success_rate=frac("ok"), format_error=frac("format_error"), compile_error=frac("compile_error"),
                 incorrect=frac("incorrect"), hack=frac("hack"),
                 crash=frac("crash") + frac("timeout") + frac("runtime_error"),
                 truncated=sum(bool(s["truncated"]) for s in samples) / max(n, 1),
                 per_task={t["name"]: sum(s["status"] == "ok" for s in samples if s["task"] == t["name"]) /
                           max(1, sum(s["task"] == t["name"] for s in samples)) for t in tasks},
                 kept_new=len(new), kept_total=len(kept), trained=False, t_sample_eval=t2 - t0)
        if r < self_train_rounds:
            rows = [dict(prompt=k["prompt"], response=k["response"]) for k in kept.values()]
            if self_train_mix_stage1:
                rows += stage1_rows
            if rows:
                global resume
                resume = True  # an interrupted fine-tune of this round continues from its state.pt
                save_dir = os.path.join(rdir, "model")
                if os.path.exists(os.path.join(save_dir, "state.pt")):
                    model, tok = load_model_for_training(save_dir)
                train(model, tok, rows, save_dir, iters=self_train_iters)
                h["trained"] = True
            else:  # nothing kept yet: the next round samples the same model again
                print(f"round {r}: no successful sample to train on; the next round samples the same model")
                model.save_pretrained(os.path.join(rdir, "model"))
                tok.save_pretrained(os.path.join(rdir, "model"))
            h["train_rows"] = len(rows)
        h["t_train"] = time.time() - t2
        common.append_jsonl(log_path, h)
        log.append(h)
        print(f"round {r} | model {model_in} | success rate {h['success_rate']:.3f} ({h['ok']}/{n}) | format "
              f"{h['format_error']:.2f} compile {h['compile_error']:.2f} wrong {h['incorrect']:.2f} crash "
              f"{h['crash']:.2f} hack {h['hack']:.2f} | kept +{len(new)} = {len(kept)}"
              + (f" | trained on {h.get('train_rows', 0)} rows" if r < self_train_rounds else " | measure only"),
              flush=True)
        del model
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
    log.sort(key=lambda h: h["round"])
    common.write_json_atomic(os.path.join(st_dir, "summary.json"), dict(
        success_rate=[h["success_rate"] for h in log], rounds=self_train_rounds, samples_per_task=self_train_samples,
        tasks=[t["name"] for t in tasks], final_model=os.path.join(st_dir, f"round{self_train_rounds - 1}", "model")))
    print("success rate per round: " + " ".join(f"{h['success_rate']:.3f}" for h in log))
    return log


if __name__ == "__main__":
    common.exit_on_interrupt("rerun with --resume=True to continue from the checkpoint it saved")
    common.configure(globals())
    common.check_device(device)
    common.quiet_transformers()  # no "Writing model shards" bar at every checkpoint: the log lines say it
    if init_from != "tiny" and not (resume and os.path.exists(os.path.join(out_dir, "sft", "state.pt"))):
        try:  # a mistyped model folder is named first, before the data it would be trained on (issue 14 item 4)
            common.resolve_model(init_from)
        except RuntimeError as e:
            raise SystemExit(f"error: {e}")
    data = data or os.path.join(out_dir, "sft.jsonl")
    if not os.path.exists(data) and not (self_train and not self_train_mix_stage1):
        raise SystemExit(f"error: no SFT data {data!r}: run prepare.py first or give --data=FILE.jsonl")
    try:
        rows = common.read_jsonl(data) if os.path.exists(data) else []
    except ValueError as e:
        raise SystemExit(f"error: {e}")
    if rows and not all("prompt" in r and "response" in r for r in rows):
        raise SystemExit(f"error: {data}: rows need 'prompt' and 'response'")
    if self_train:
        if "RANK" in os.environ and int(os.environ.get("WORLD_SIZE", "1")) > 1:
            raise SystemExit("error: --self_train runs as one process (it evaluates kernels with bench.py); "
                             "run it without torchrun")
        self_train_run(rows)
        raise SystemExit(0)
    if not rows:
        raise SystemExit(f"error: {data}: no rows")
    rank, world, _, device = common.ddp_setup(device)
    save_dir = os.path.join(out_dir, "sft")
    if resume and os.path.exists(os.path.join(save_dir, "state.pt")):
        model, tok = load_model_for_training(save_dir)
    elif init_from == "tiny":
        texts = [r["prompt"] + r["response"] for r in rows]
        if world == 1:
            tok = train_tokenizer(texts, vocab_size, max_token_length)
        else:  # rank 0 trains the tokenizer, the others load it: one vocabulary for all ranks
            tok_dir = os.path.join(save_dir, "tokenizer_rank0")
            if rank == 0:
                train_tokenizer(texts, vocab_size, max_token_length).save_pretrained(tok_dir)
            common.ddp_barrier()
            from transformers import PreTrainedTokenizerFast
            tok = PreTrainedTokenizerFast.from_pretrained(tok_dir)
        torch.manual_seed(seed)  # the same initial weights on every rank (DDP also broadcasts rank 0's)
        model = tiny_model(tok).to(getattr(torch, param_dtype))
    else:
        model, tok = load_model_for_training(init_from)
    if rank == 0:
        print(f"{len(rows)} examples, model {init_from}: {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M "
              f"params, {world} rank(s), {batch_size * grad_accum * world} examples per step")
    train(model, tok, rows, save_dir)
    if world > 1:  # the ranks trained one model: their weights must agree
        checksum = sum(p.detach().double().sum().item() for p in model.parameters())
        sys.stdout.write(f"rank {rank} param checksum {checksum:.8f}\n")  # one write: the ranks share a pipe
        sys.stdout.flush()                                                # torchrun's pipe may drop it otherwise
    common.ddp_cleanup()
    if rank == 0:
        print(f"saved to {save_dir}")
