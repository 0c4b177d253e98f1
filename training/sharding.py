"""
Sharded data parallelism (FSDP2, torch.distributed.fsdp.fully_shard) for policies too large to replicate: each rank
keeps 1 / world_size of every parameter, gradient and AdamW state, and gathers one decoder layer at a time for its
forward and backward. rl.py uses it with --fsdp=True instead of summing replicated gradients by hand (training/ddp.py).

Rules the callers keep, since FSDP's all-gathers and reduce-scatters are collectives every rank must join:
 - every rank runs the policy the same number of times, in the same order (grpo_update: even_passes pads a rank
   with fewer micro-batches, or none, with zero-loss passes; generate: synced_gpus);
 - checkpoints are gathered by every rank (full_state_dicts) and written by rank 0 as full, unsharded weights in the
   Hugging Face folder and a full optimizer state, so --resume (same world size) continues exactly;
 - the gradient norm of clip_grad_norm_ over the sharded (DTensor) parameters is the norm of the whole gradient.
"""
import types

import torch
import torch.distributed as dist


def is_sharded(model):
    """True when shard_model has sharded `model` (its parameters are DTensors)."""
    from torch.distributed.fsdp import FSDPModule
    return isinstance(model, FSDPModule)


def _ensure_process_group(device):
    """A process group to shard over: torchrun's, or (a single process, e.g. one GPU without torchrun) a group of
    one rank on an in-memory store: gloo on the CPU, NCCL on CUDA."""
    if dist.is_initialized():
        return
    if device.type == "cuda":
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1, device_id=device)
    else:
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)


def shard_model(model, mixed_precision=True, master_dtype=torch.float32):
    """Shard a Hugging Face causal LM in place with FSDP2: fully_shard on each decoder layer (model._no_split_modules
    names their class), then on the root (embeddings, final norm, output head). Returns the model.

    Gradients are summed over the ranks, not averaged (rl.py divides each rank's loss by the whole batch's
    totals, as for training/ddp.ddp_all_reduce_grads).
    mixed_precision: on CUDA, layers are gathered and compute in bfloat16 and gradients are reduced in float32
    (MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32)); on the CPU everything stays float32, so
    that the CPU tests compare with the unsharded path exactly.
    master_dtype: the dtype the sharded parameters themselves are kept in, and so their gradients and AdamW state.
    Bytes per parameter on each of N ranks: float32 16 / N (4 weight + 4 gradient + 8 AdamW moments); bfloat16
    8 / N (2 + 2 + 4), which brings a 7B policy (7.6e9 parameters) from 113 GiB to 57 GiB on one GPU. On top:
    the bf16 copy of the layers being gathered, and the root's parameters, which stay gathered from forward to
    backward. A bfloat16 master loses small updates: a step below ~1/256 of a weight rounds away (AdamW at
    lr=1e-6 moves a weight of 0.01 by 1e-4 of itself), so it suits memory and speed measurements, not training.

    Without a process group (one process outside torchrun) a group of one rank is made. completion_logp runs the
    decoder and the output head itself rather than model.forward, so the model gets a `decoder_forward(**inputs)`
    method (the decoder's output) registered as an FSDP forward method: calling it gathers the root's parameters, as
    model.forward would. It takes the decoder's inputs because FSDP's pre-forward hook moves them to the device and,
    on CUDA under torch 2.11, fails on a call with none (as get_decoder() would be). Raises ValueError for a model
    without decoder layers to shard."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard, register_fsdp_forward_method
    device = next(model.parameters()).device
    layer_names = set(getattr(model, "_no_split_modules", None) or [])
    layers = [m for m in model.modules() if type(m).__name__ in layer_names]
    if not layers:
        raise ValueError(f"shard_model: {type(model).__name__} names no decoder layer class (_no_split_modules)")
    _ensure_process_group(device)
    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    use_bf16 = mixed_precision and device.type == "cuda"
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16 if use_bf16 else None,
                                  reduce_dtype=torch.float32 if use_bf16 else None)
    model.to(master_dtype)
    for layer in layers:
        fully_shard(layer, mesh=mesh, mp_policy=policy)
    fully_shard(model, mesh=mesh, mp_policy=policy)
    for module in [*layers, model]:  # sum the gradients over the ranks (FSDP averages by default): the callers'
        module.set_gradient_divide_factor(1.0)  # losses are already divided by the totals of the whole batch;
        module.set_force_sum_reduction_for_comms(True)  # a plain SUM (gloo has no PREMUL_SUM)
    model.decoder_forward = types.MethodType(_decoder_forward, model)
    register_fsdp_forward_method(model, "decoder_forward")
    return model


def _decoder_forward(self, **inputs):
    return self.get_decoder()(**inputs)


def _idle_pass(model):
    """One forward (and with gradients enabled, backward) of the policy on one token, adding nothing: it joins the
    all-gathers and reduce-scatters the other ranks run for their micro-batches."""
    from training.models import completion_logp
    logp = completion_logp(model, [dict(prompt_ids=[0], completion_ids=[0])], 0, 1.0)[0]  # (1, 1)
    if torch.is_grad_enabled():
        (logp.sum() * 0.0).backward()


def even_passes(model, chunks, runs_policy=True):
    """Yield `chunks` (the caller runs the policy once on each when runs_policy, else on none); then, when the
    model is sharded over more than one rank, run idle passes (a forward, and a backward where gradients are on)
    until this rank has run the policy as often as the busiest rank. A rank whose rows were all masked out has
    no chunks and runs only idle passes, so FSDP's collectives still meet. A collective: every rank calls it at
    the same point (the counts are exchanged before the first chunk, as the busiest rank's passes then begin)."""
    if not is_sharded(model) or dist.get_world_size() == 1:
        yield from chunks
        return
    mine = len(chunks) if runs_policy else 0
    counts = [None] * dist.get_world_size()
    dist.all_gather_object(counts, mine)
    yield from chunks
    for _ in range(max(counts) - mine):
        _idle_pass(model)


def reduce_grads(model):
    """Sum replicated gradients over the ranks (training/ddp.ddp_all_reduce_grads); nothing for a sharded model,
    whose backward already reduce-scattered them."""
    from training import ddp
    if not is_sharded(model):
        ddp.ddp_all_reduce_grads(model)


def full_state_dicts(model, opt):
    """(weights, optimizer state) for a checkpoint. Sharded: every rank must call it (it gathers); rank 0 gets the
    full weights {name: CPU tensor} and the full optimizer state keyed by parameter name, the other ranks empty
    dicts. Unsharded: (None, opt.state_dict()), the model's own weights are saved as they are."""
    if not is_sharded(model):
        return None, opt.state_dict()
    from torch.distributed.checkpoint.state_dict import (StateDictOptions, get_model_state_dict,
                                                         get_optimizer_state_dict)
    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    weights = get_model_state_dict(model, options=options)
    unique = {name for name, _ in model.named_parameters()}
    for name, _ in model.named_parameters(remove_duplicate=False):  # a tied weight (Qwen2.5's output head) comes
        if name not in unique:  # back as its own copy: save it once, as save_pretrained does for the unsharded model
            weights.pop(name, None)
    return weights, get_optimizer_state_dict(model, opt, options=options)


def load_optimizer_state(model, opt, state):
    """Load what full_state_dicts saved: opt.load_state_dict for an unsharded model; a sharded model takes its
    shard of the full state (every rank passes the whole state, read from the checkpoint)."""
    if not is_sharded(model):
        opt.load_state_dict(state)
        return
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict
    set_optimizer_state_dict(model, opt, state, options=StateDictOptions(full_state_dict=True))
