"""rl.py's checkpoint: the policy in the Hugging Face format (out_dir/rl/ckpt) and state.pt beside it (optimizer,
step, history, exemplar database, result cache, the shared task RNG and every rank's RNG states, and with
async_rollouts the batch generated for the next step), so that --resume continues exactly: the next step is the
one an uninterrupted run makes (tests/test_rl_runs.py)."""
import os
import shlex
import sys

import torch

import common
from training.rl_log import plot


def refuse_existing_run(rl_dir, out_dir, max_steps):
    """Exit when rl_dir already holds a run and --resume was not given: status 0 with a line when it is finished
    and evaluated, else an error saying how to continue it or start another."""
    log_path = os.path.join(rl_dir, "log.jsonl")
    if not (os.path.exists(log_path) and os.path.getsize(log_path) > 0):
        return
    n_logged = len(common.read_jsonl(log_path))
    report = os.path.join(out_dir, "eval", "summary.md")
    if n_logged >= max_steps and os.path.exists(report):
        print(f"{rl_dir} holds a finished run (report: {report}): --resume=True prints the report again; "
              "--out_dir=ANOTHER_FOLDER makes another run")
        sys.exit(0)
    sys.exit(f"error: {rl_dir} already holds a run ({n_logged} logged steps): --resume=True continues it; for another "
             "run point --out_dir at another folder (or at a copy of this one without rl/ and eval/, to reuse its "
             "data and SFT model)")


def resume_command(world):
    """The command that continues this run: this one with --resume=True (or, under torchrun, words saying so)."""
    if world > 1:
        return "the same torchrun command and --resume=True"
    return " ".join(["python"] + [shlex.quote(a) for a in sys.argv if a != "--resume=True"] + ["--resume=True"])


def rng_state(rank_rng, device, pending):
    """This rank's RNG states, and (async_rollouts) the batch generated for the next step, saved with them."""
    return dict(py=rank_rng.getstate(), torch=torch.get_rng_state(),
                cuda=torch.cuda.get_rng_state() if device.startswith("cuda") else None, pending=pending)


def save(ckpt_dir, rl_dir, model, tok, state, history, weights=None):
    """Rank 0 only: model and tokenizer, then state.pt through a temp file (state: opt, step, history, db, cache,
    rng, rank_rng, init_src, config), and rl_dir's db.json, cache.json and curves.png. weights: the full
    {name: tensor} of a sharded model (training/sharding.full_state_dicts), saved in its place; None: the model's."""
    os.makedirs(ckpt_dir, exist_ok=True)
    model.save_pretrained(ckpt_dir, state_dict=weights)
    tok.save_pretrained(ckpt_dir)
    path = os.path.join(ckpt_dir, "state.pt")
    torch.save(state, path + ".tmp")
    os.replace(path + ".tmp", path)
    common.write_json_atomic(os.path.join(rl_dir, "db.json"), state["db"])
    common.write_json_atomic(os.path.join(rl_dir, "cache.json"), state["cache"])
    if history:
        plot(history, os.path.join(rl_dir, "curves.png"))


def restore_rngs(state, rank, world, rank_rng, device, seed):
    """Set the RNGs from a checkpoint's state; returns the batch an async run had generated for this step (None
    without one). A checkpoint of another world size has no state for this rank: fresh per-rank streams."""
    step = state["step"]
    rng_states = state.get("rank_rng", [])
    if len(rng_states) != world:
        print(f"rank {rank}: checkpoint has no RNG state for {world} rank(s): reseeding")
        rank_rng.seed(seed + 1 + rank + 1000 * step)
        torch.manual_seed(seed + rank + 1000 * step)
        return None
    mine = rng_states[rank]
    rank_rng.setstate(mine["py"])
    torch.set_rng_state(mine["torch"])
    if mine["cuda"] is not None and device.startswith("cuda"):
        torch.cuda.set_rng_state(mine["cuda"])
    return mine.get("pending")
