"""
Data parallelism under torchrun (DDP) for sft.py and rl.py: joining the process group, gathering objects, summing
gradients by hand, and pinning a rank's child processes to its own GPU.

sft.py wraps its model in DistributedDataParallel. rl.py sums gradients by hand (ddp_all_reduce_grads), since a rank
may have no rows to train on: every rank holds the whole model, generates and evaluates num_prompts / world_size
prompts on its own GPU (num_prompts rounded up to a multiple of world_size: split_prompts), and the loss is divided
by the totals of the whole batch, so the update is the one a single GPU would make on the full batch. Tasks per step
come from an RNG shared by all ranks; exemplars and sampling from per-rank RNGs. Rewards are normalised over the
full batch; the result cache and the exemplar database are merged across ranks every step (ddp_gather), and a kernel
drawn on two ranks is evaluated once. Only rank 0 writes logs and checkpoints; the chained stages run on rank 0
alone while the others wait.
"""
import contextlib
import os
import time

# Data parallelism under torchrun (DDP). torchrun sets RANK, WORLD_SIZE and LOCAL_RANK for each process it starts;
# without them a script runs as the single rank 0 of a world of 1 and none of this touches torch.distributed.

def ddp_setup(device="cuda", timeout_min=180):
    """Join the process group torchrun prepared. Returns (rank, world_size, local_rank, device): device is
    "cuda:<local_rank>" (NCCL backend) when `device` asks for CUDA, else "cpu" (gloo backend). Outside torchrun:
    (0, 1, 0, device) and no process group. timeout_min: how long a collective waits for the slowest rank (long,
    because one rank may be compiling kernels or running a sub-stage for many minutes while the others wait)."""
    import datetime
    import torch
    import torch.distributed as dist
    if "RANK" not in os.environ:
        return 0, 1, 0, device
    rank, world, local = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])
    if str(device).startswith("cuda"):
        torch.cuda.set_device(local)
        device = f"cuda:{local}"
        dist.init_process_group("nccl", device_id=torch.device(device),
                                timeout=datetime.timedelta(minutes=timeout_min))
    else:
        device = "cpu"
        dist.init_process_group("gloo", timeout=datetime.timedelta(minutes=timeout_min))
    return rank, world, local, device


def split_prompts(num_prompts, world, say=False):
    """(total, per_rank): num_prompts rounded up to a multiple of the world size, and each rank's share. Every rank
    samples and trains on as many prompts as the others, so a preset's num_prompts works on any number of GPUs (4 on
    8 ranks: 8 prompts, one per rank). say: print one line when the total changed (rank 0)."""
    per_rank = -(-num_prompts // world)  # ceil
    if say and per_rank * world != num_prompts:
        print(f"num_prompts={num_prompts} rounded up to {per_rank * world}: {per_rank} per rank on {world} ranks",
              flush=True)
    return per_rank * world, per_rank


def ddp_cleanup():
    """Leave the process group (a no-op outside torchrun); call once at the end of a script."""
    import torch.distributed as dist
    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
        # gloo's worker threads free a finished collective after its waiter has returned, and freeing one that holds
        # Python tensors takes the GIL: a thread still doing so when the interpreter shuts down aborts the process
        # ("terminate called without an active exception", exit -6, though the script had finished). A sleep hands
        # them the GIL first.
        time.sleep(0.2)


def ddp_gather(obj):
    """all_gather_object: the list of `obj` from every rank, in rank order ([obj] outside torchrun)."""
    import torch.distributed as dist
    if not (dist.is_available() and dist.is_initialized()):
        return [obj]
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def ddp_barrier():
    """Wait for every rank (a no-op outside torchrun)."""
    import torch.distributed as dist
    if dist.is_available() and dist.is_initialized():
        dist.barrier()


def param_checksum(model):
    """Sum of all weights in float64: equal on every rank after each step, or data parallelism is broken. For a
    model sharded with FSDP (DTensor parameters) the sum over all shards: a collective, every rank calls it."""
    import torch
    with torch.no_grad():
        sums = [p.double().sum() for p in model.parameters()]
        return round(sum((s.full_tensor() if hasattr(s, "full_tensor") else s).item() for s in sums), 6)


def ddp_all_reduce_grads(model):
    """Sum every parameter's gradient over the ranks (data parallelism by hand: a rank whose micro-batches were all
    masked out still takes part, with zero gradients). The caller's loss must already be divided by the batch
    totals of all ranks, so that the sum is the gradient of the full-batch loss. A no-op outside torchrun."""
    import torch
    import torch.distributed as dist
    if not (dist.is_available() and dist.is_initialized()):
        return
    works = []
    for p in model.parameters():
        if p.requires_grad:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            works.append(dist.all_reduce(p.grad, async_op=True))
    for w in works:
        w.wait()


@contextlib.contextmanager
def visible_gpu(local_rank):
    """Within the block, child processes see only this rank's GPU (as cuda:0): bench.py's build and timing children
    then use the rank's own GPU and never another rank's. This process is unaffected (CUDA is already initialised)."""
    old = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = old.split(",") if old else [str(i) for i in range(int(os.environ.get("LOCAL_WORLD_SIZE", "1")))]
    os.environ["CUDA_VISIBLE_DEVICES"] = ids[local_rank]
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = old
