"""FSDP2 sharding (training/sharding.py) on CPU with gloo: the sharded GRPO update is the replicated one (rl.py's
by-hand gradient sum), also for a rank with fewer rows or none; a checkpoint of a sharded run resumes exactly; and
one process without torchrun shards over a group of one rank it makes itself."""
import os
import subprocess
import sys
import textwrap

import pytest

from test_rl_ddp import ROOT, torchrun

COMMON = textwrap.dedent("""
    import os, sys, torch, torch.distributed as dist, rl
    from training import checkpoint, ddp, sharding
    from transformers import LlamaConfig, LlamaForCausalLM
    rank, world, _, _ = ddp.ddp_setup("cpu")
    ROWS = [dict(prompt_ids=[1, 2, 3], completion_ids=[4, 5, 6, 7, 8]), dict(prompt_ids=[9], completion_ids=[10]),
            dict(prompt_ids=[11, 12], completion_ids=[13, 14]),
            dict(prompt_ids=[15, 16, 17, 18], completion_ids=[19, 20, 21])]
    ADV = torch.tensor([1.0, -0.5, 2.0, -1.0])

    def tiny(seed=0):
        torch.manual_seed(seed)
        cfg = LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                          num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=32,
                          tie_word_embeddings=True)  # tied, as the small Qwen2.5 models: the head is the embedding
        return LlamaForCausalLM(cfg)

    def weights(model):  # {name: full float32 tensor}; a collective for a sharded model
        return {n: (p.full_tensor() if hasattr(p, "full_tensor") else p).detach().clone()
                for n, p in model.named_parameters()}

    def update(model, opt, first, ref=None):  # rank 0 takes ROWS[:first], rank 1 the rest (world 1: all)
        mine = (slice(0, first) if rank == 0 else slice(first, 4)) if world == 2 else slice(0, 4)
        stats, n = rl.grpo_update(model, ref, opt, ROWS[mine], ADV[mine], 0, world=world)
        return sum(s["loss"] for s in ddp.ddp_gather(stats)), n
""")

EQUAL = COMMON + textwrap.dedent("""
    # (loss type, rows of rank 0, gradient clip): 3 + 1 and 4 + 0 rows (rank 1 runs idle passes only), clip active
    out = {}
    for lt, first, clip in (("grpo", 3, 0.05), ("grpo", 4, 0.05), ("bnpo", 2, 1e9)):
        rl.loss_type, rl.micro_batch_size, rl.num_iterations, rl.beta = lt, 1, 2, 0.1
        rl.max_completion_length, rl.temperature, rl.grad_clip, rl.epsilon, rl.epsilon_high = 8, 1.0, clip, 0.2, 0.2
        runs = {}
        for sharded in (False, True):
            model, ref = tiny(), tiny(1).requires_grad_(False)
            if sharded:
                sharding.shard_model(model)
            before = weights(model)
            opt = torch.optim.SGD(model.parameters(), lr=1.0)  # SGD: the weights move by the (clipped) gradient
            loss, n = update(model, opt, first, ref)
            after = weights(model)
            runs[sharded] = dict(loss=loss, n=n, moved=sum(((after[k] - before[k]) ** 2).sum() for k in after) ** 0.5,
                                 params=after)
        out[lt, first] = runs
    if rank == 0:
        torch.save(out, sys.argv[1])
    ddp.ddp_cleanup()
""")


def check_equal(out):
    for key, runs in out.items():
        ddp_run, fsdp_run = runs[False], runs[True]
        assert ddp_run["n"] == fsdp_run["n"] == 4, key
        assert abs(ddp_run["loss"] - fsdp_run["loss"]) < 1e-6, (key, ddp_run["loss"], fsdp_run["loss"])
        diff = max((ddp_run["params"][k] - fsdp_run["params"][k]).abs().max().item() for k in ddp_run["params"])
        assert diff < 1e-6, (key, diff)
        if key[0] == "grpo":  # the clip acted (on the norm of the whole gradient): two steps, each 0.05 long at most
            assert 0.05 < fsdp_run["moved"] <= 0.1 + 1e-6, (key, fsdp_run["moved"])
        else:  # unclipped: a gradient averaged over the ranks instead of summed would move half as far
            assert fsdp_run["moved"] > 1.0, (key, fsdp_run["moved"])


def test_fsdp_update_equals_ddp_update(tmp_path):
    """Two gloo ranks: grpo_update on the sharded model gives the loss and the weights (to float32 rounding) of the
    replicated model with the by-hand gradient sum, with 2 + 2... and 4 + 0 rows (the rank without rows joins FSDP's
    collectives through zero-loss passes, else this hangs), num_iterations=2 (forwards without gradients for
    old_logp) and beta (an unsharded reference model), and clip_grad_norm_ clips the norm of the whole gradient."""
    import torch
    script = tmp_path / "equal.py"
    script.write_text(EQUAL)
    p = torchrun([str(script), str(tmp_path / "two.pt")], tmp_path, 300)
    assert p.returncode == 0, p.stderr[-3000:]
    check_equal(torch.load(tmp_path / "two.pt"))


def test_fsdp_one_process_without_torchrun(tmp_path):
    """A single process (one GPU without torchrun): shard_model makes a group of one rank; the update is unchanged."""
    import torch
    script = tmp_path / "equal.py"
    script.write_text(EQUAL)
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1")
    env.pop("RANK", None)
    p = subprocess.run([sys.executable, str(script), str(tmp_path / "one.pt")], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    check_equal(torch.load(tmp_path / "one.pt"))


RESUME = COMMON + textwrap.dedent("""
    # a run of two AdamW steps, saved after the first as rl.py saves; then a fresh model and optimizer from that
    # checkpoint take the second step again
    ckpt = sys.argv[1]
    rl.loss_type, rl.micro_batch_size, rl.num_iterations, rl.beta, rl.grad_clip = "grpo", 1, 1, 0.0, 1.0
    rl.max_completion_length, rl.temperature = 8, 1.0

    class Tok:  # checkpoint.save writes the tokenizer too: none here
        def save_pretrained(self, path):
            pass

    model = sharding.shard_model(tiny())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, betas=(0.9, 0.99))
    update(model, opt, 2)
    saved, opt_state = sharding.full_state_dicts(model, opt)
    step1 = {k: v.clone() for k, v in saved.items()}  # (save_pretrained empties the dict it writes)
    if rank == 0:
        checkpoint.save(ckpt, ckpt, model, Tok(), dict(opt=opt_state, step=1, db={}, cache={}), [], saved)
    dist.barrier()
    loss_run, _ = update(model, opt, 3)
    run = weights(model)
    model = sharding.shard_model(LlamaForCausalLM.from_pretrained(ckpt))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, betas=(0.9, 0.99))
    sharding.load_optimizer_state(model, opt, torch.load(os.path.join(ckpt, "state.pt"), weights_only=False)["opt"])
    loss_resumed, _ = update(model, opt, 3)
    resumed = weights(model)
    if rank == 0:
        torch.save(dict(run=run, resumed=resumed, loss=(loss_run, loss_resumed),
                        saved=step1), os.path.join(ckpt, "result.pt"))
    ddp.ddp_cleanup()
""")


def test_fsdp_resume_is_exact(tmp_path):
    """Two gloo ranks, AdamW: full weights in the Hugging Face folder (rank 0) and the full optimizer state in
    state.pt; a sharded model and optimizer loaded from them take step 2 bit for bit as the run that went on."""
    import json
    import torch
    script = tmp_path / "resume.py"
    script.write_text(RESUME)
    ckpt = tmp_path / "ckpt"
    p = torchrun([str(script), str(ckpt)], tmp_path, 300)
    assert p.returncode == 0, p.stderr[-3000:]
    out = torch.load(ckpt / "result.pt")
    assert json.load(open(ckpt / "config.json"))["architectures"] == ["LlamaForCausalLM"]
    assert out["loss"][0] == out["loss"][1]
    assert out["run"].keys() == out["resumed"].keys()
    for name in out["run"]:
        assert torch.equal(out["run"][name], out["resumed"][name]), name
    # the folder holds the full tensors of step 1 (not a rank's shard), and step 2 changed them
    from safetensors.torch import load_file
    folder = load_file(str(ckpt / "model.safetensors"))
    assert folder.keys() == out["saved"].keys() == out["run"].keys()
    assert all(torch.equal(folder[n], out["saved"][n]) and folder[n].shape == out["run"][n].shape for n in folder)
    assert all(not torch.equal(folder[n], out["run"][n]) for n in folder)


@pytest.mark.slow
def test_rl_fsdp_torchrun_resume_is_exact(tiny_cpu_prepared, tmp_path):
    """`torchrun --nproc_per_node=2 rl.py --fsdp=True` on the CPU tasks: 2 steps straight, or 1 step and --resume
    for 1 more (reusing the first run's bench results, as test_rl_runs does): the same log and, bit for bit, the
    same final weights and AdamW state; the folder holds full weights, loadable without FSDP. One step on each side
    of the resume is enough: the step after it starts from the saved sharded weights, AdamW moments and step
    count and RNG states, and any of them lost changes its update (test_rl_runs resumes 2 + 2 steps unsharded)."""
    import torch
    from safetensors.torch import load_file
    from test_rl_runs import VOLATILE, fresh, lines, run
    args = ["-m", "torch.distributed.run", "--nproc_per_node=2", "--standalone", "rl.py", "--preset=tiny_cpu",
            "--prepare_if_missing=False", "--run_evaluate=False", "--num_prompts=2", "--num_generations=3",
            "--micro_batch_size=1", "--gen_batch_size=6", "--save_interval=100", "--fsdp=True"]
    a, b = fresh(tiny_cpu_prepared, tmp_path, "a"), fresh(tiny_cpu_prepared, tmp_path, "b")
    run([*args, f"--out_dir={a}", "--max_steps=2"], tmp_path)
    run([*args, f"--out_dir={b}", "--max_steps=1", f"--result_cache={a / 'rl' / 'cache.json'}"], tmp_path)
    p = run([*args, f"--out_dir={b}", "--max_steps=2", "--resume=True"], tmp_path)
    assert "at step 1" in p.stdout
    la, lb = lines(a / "rl" / "log.jsonl"), lines(b / "rl" / "log.jsonl")
    assert [h["step"] for h in la] == [h["step"] for h in lb] == [0, 1]
    for ha, hb in zip(la, lb):
        for k in ha:
            if k not in VOLATILE:
                assert hb[k] == pytest.approx(ha[k], rel=1e-5, abs=1e-7), (ha["step"], k, ha[k], hb[k])
    wa, wb, w0 = (load_file(str(d / "model.safetensors")) for d in (a / "rl" / "ckpt", b / "rl" / "ckpt",
                                                                     tiny_cpu_prepared / "sft"))
    assert wa.keys() == wb.keys() == w0.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    assert any(not torch.equal(wa[k], w0[k]) for k in wa), "RL left the weights as they were: a trivial match"
    oa, ob = (torch.load(d / "rl" / "ckpt" / "state.pt", weights_only=False)["opt"] for d in (a, b))
    assert oa["state"] and oa["state"].keys() == ob["state"].keys()
    assert all(torch.equal(v, ob["state"][name][k]) for name, s in oa["state"].items() for k, v in s.items())


@pytest.mark.gpu
@pytest.mark.parametrize("master_dtype", ["float32", "bfloat16"])
def test_fsdp_shards_qwen2_on_one_gpu(master_dtype):
    """One GPU, no torchrun: a small random Qwen2 (tied embeddings) sharded over one rank with bf16 compute and
    float32 reductions, its sharded weights kept in master_dtype, takes an AdamW step (lr 1e-3: a bf16 master
    rounds away much smaller steps); the loss is finite and the weights move."""
    import torch
    import rl
    from training import sharding
    from transformers import Qwen2Config, Qwen2ForCausalLM
    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=1024, hidden_size=256, intermediate_size=512, num_hidden_layers=4,
                      num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True)
    model = sharding.shard_model(Qwen2ForCausalLM(cfg).to("cuda"), master_dtype=getattr(torch, master_dtype))
    assert all(p.dtype == getattr(torch, master_dtype) for p in model.parameters())
    before = {n: p.full_tensor().clone() for n, p in model.named_parameters()}
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    rl.loss_type, rl.micro_batch_size, rl.num_iterations, rl.beta, rl.grad_clip = "grpo", 2, 1, 0.0, 1.0
    rows = [dict(prompt_ids=list(range(1, 40)), completion_ids=list(range(50, 90))) for _ in range(4)]
    amp = torch.autocast("cuda", dtype=torch.bfloat16)
    stats, n = rl.grpo_update(model, None, opt, rows, torch.tensor([1.0, -1.0, 0.5, -0.5]), 0, amp)
    assert n == 4 and torch.isfinite(torch.tensor(stats["loss"]))
    assert any(not torch.equal(before[n], p.full_tensor()) for n, p in model.named_parameters())
    torch.distributed.destroy_process_group()  # the one-rank group shard_model made: later tests start without
