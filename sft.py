"""
Stages 1 and 2 of CUDA-L1: supervised fine-tuning on (prompt, response) pairs, in plain PyTorch.

    python sft.py --init_from=Qwen/Qwen2.5-Coder-1.5B-Instruct --data=out/sft.jsonl   # stage 1, a Hugging Face model
    python sft.py --preset=tiny   # stage 1, a tiny model from scratch
    torchrun --nproc_per_node=8 sft.py --init_from=...   # stage 1 on 8 GPUs (DDP)
    python sft.py --preset=tiny --self_train=True --self_train_rounds=2   # stage 2 from out_dir/sft

Stage 1 (REFERENCE.md §1.1), the loop in train():
 1. encode: each row through the model's chat template (training/models.py); val_fraction of the rows held out;
 2. batch: batch_size rows per micro-batch, grad_accum micro-batches per step, drawn by each rank on its own;
 3. loss: next-token cross-entropy on the response tokens and their EOS only, the token mean over the whole step;
 4. update: AdamW, gradient clip, linear warm-up then cosine decay to min_lr;
 5. log every log_interval steps (validation loss every eval_interval); save every save_interval, at the end, on Ctrl-C.
Stage 2 (--self_train=True): rounds of sampling, bench.py, and fine-tuning on the correct kernels
(training/self_train.py).

Choices the paper does not fix, one line each:
 - init_from="tiny" builds a small Llama and trains a byte-level BPE on the data itself: nothing is downloaded;
 - that BPE's merges may cross spaces and newlines (up to max_token_length characters), to keep sequences short;
 - on CUDA the forward runs under bf16 autocast over float32 weights and AdamW state (param_dtype="bfloat16": half);
 - under torchrun every rank holds the whole model in DistributedDataParallel; FSDP is not implemented, so a model
   must fit one GPU with its float32 AdamW state (about 16 bytes per parameter, scripts/sft_speed.py).
Output: out_dir/sft, the Hugging Face format (transformers and vLLM load it) plus state.pt (optimizer, iteration,
history, every rank's RNG states) and history.json; --resume=True continues exactly where the checkpoint stopped.
"""
import contextlib
import math
import os
import random
import sys
import time
import types

import torch
import torch.nn.functional as F

import common
from training import ddp, self_train as stage2
from training.models import encode_example, enable_checkpointing, load_model, quiet_transformers, resolve_model

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
use_vllm = False  # sample with vLLM when installed (training/generation.py)
gpu_name = "NVIDIA A100"  # the GPU named in the prompt ("CPU": the prompt of the CPU task)
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
    cross-entropy is divided by the step's total number of target tokens, not averaged as micro-batch means.
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
    # 1. encode (one split for every rank)
    examples = [encode_example(tok, r["prompt"], r["response"], max_len) for r in rows]
    rng = random.Random(seed)
    rng.shuffle(examples)  # the same split on every rank
    n_val = int(len(examples) * val_fraction) if len(examples) >= 10 else 0
    val, train_examples = examples[:n_val], examples[n_val:]
    assert train_examples, "no training examples"
    if rank:  # each rank draws its own batches (rank 0 goes on with the shuffling generator, as one process does)
        rng = random.Random(seed + rank)
    torch.manual_seed(seed + rank)
    model.to(device).train()
    if gradient_checkpointing:
        enable_checkpointing(model)
    wrapped = model  # the DistributedDataParallel wrapper under torchrun
    if world > 1:
        from torch.nn.parallel import DistributedDataParallel
        wrapped = DistributedDataParallel(model, device_ids=[torch.device(device).index] if "cuda" in device else None)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay, betas=(0.9, 0.95))
    it, history = 0, []
    state_path = os.path.join(save_dir, "state.pt")
    if resume and os.path.exists(state_path):
        saved = torch.load(state_path, weights_only=False, map_location="cpu")
        assert saved["world_size"] == world, \
            f"{state_path} was saved by {saved['world_size']} ranks, this run has {world}"
        opt.load_state_dict(saved["opt"])
        it, history = saved["iter"], saved["history"]
        rng.setstate(saved["py_rng"][rank])
        torch.set_rng_state(saved["torch_rng"][rank])
        if rank == 0:
            print(f"resumed at iter {it} from {save_dir}")
    amp = torch.autocast("cuda", dtype=getattr(torch, dtype), enabled="cuda" in device and dtype != "float32")

    def save():
        """Model + tokenizer (HF format) + state.pt; every rank's RNG states so that a resume is exact. Called only
        at iteration boundaries, by every rank (it gathers the RNG states)."""
        py, th = ddp.ddp_gather(rng.getstate()), ddp.ddp_gather(torch.get_rng_state())
        if rank == 0:
            os.makedirs(save_dir, exist_ok=True)
            model.save_pretrained(save_dir)
            tok.save_pretrained(save_dir)
            torch.save(dict(opt=opt.state_dict(), iter=it, history=history, py_rng=py, torch_rng=th, world_size=world,
                            config=common.config_keys(globals())), state_path + ".tmp")
            os.replace(state_path + ".tmp", state_path)
            common.write_json_atomic(os.path.join(save_dir, "history.json"), history)
        ddp.ddp_barrier()

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
            # 2. batch: the step's micro-batches first, as the token mean of the step needs their target-token total
            batches = [collate(rng.sample(train_examples, min(batch_size, len(train_examples))), tok.pad_token_id,
                               device)  # (B, T) each
                       for _ in range(grad_accum)]
            n_tgt = torch.stack([m[:, 1:].sum() for _, m in batches]).sum().float()
            if world > 1:
                torch.distributed.all_reduce(n_tgt)
            n_tgt = n_tgt.clamp(min=1.0) / world  # DDP averages the ranks' gradients: undo its 1 / world
            total = 0.0  # 3. loss, each micro-batch's share of the step's token mean
            for micro, (ids, mask) in enumerate(batches):
                ntok += ids.numel()
                # DDP: all-reduce the gradients only on the last micro-batch
                sync = wrapped.no_sync() if (world > 1 and micro < grad_accum - 1) else contextlib.nullcontext()
                with sync:
                    with amp:
                        loss = sft_loss(wrapped, ids, mask, num_tokens=n_tgt)
                    loss.backward()
                total += loss.item()
            torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)  # 4. update
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
            # 5. log (above) and save at an iteration boundary: weights, optimizer, counter, history and RNG states
            # belong to the same moment
            halt = any(ddp.ddp_gather(bool(stop))) if world > 1 else bool(stop)
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


def finetune(model, tok, rows, save_dir, iters):
    """Stage 2's fine-tune of one round: train() resuming from save_dir's state.pt when an interrupt left one."""
    global resume
    resume = True
    return train(model, tok, rows, save_dir, iters=iters)


def load_model_for_training(path):
    """load_model with this script's param_dtype; SystemExit with the cause when it cannot be loaded."""
    try:
        return load_model(path, dtype=param_dtype)
    except RuntimeError as e:
        raise SystemExit(f"error: {e}")


if __name__ == "__main__":
    common.exit_on_interrupt("rerun with --resume=True to continue from the checkpoint it saved")
    common.configure(globals())
    quiet_transformers()  # no "Writing model shards" bar at every checkpoint: the log lines say it
    resuming = resume and os.path.exists(os.path.join(out_dir, "sft", "state.pt"))
    if init_from != "tiny" and not self_train and not resuming:
        try:  # a mistyped model folder is named first, before the device and the data it would be trained on
            resolve_model(init_from)
        except RuntimeError as e:
            raise SystemExit(f"error: {e}")
    common.check_device(device)
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
        stage2.run(types.SimpleNamespace(**common.config_keys(globals())), rows, load_model_for_training, finetune)
        raise SystemExit(0)
    if not rows:
        raise SystemExit(f"error: {data}: no rows")
    rank, world, _, device = ddp.ddp_setup(device)
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
            ddp.ddp_barrier()
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
    ddp.ddp_cleanup()
    if rank == 0:
        print(f"saved to {save_dir}")
