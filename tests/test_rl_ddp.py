"""Data parallelism on CPU with real `torchrun --nproc_per_node=2` (gloo): ddp.ddp_setup, and rl.py itself."""
import json
import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def torchrun(args, tmp_path, timeout):
    env = dict(os.environ, PYTHONPATH=ROOT, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1",
               CUDAL1_BUILD_ROOT=str(tmp_path / "build"))
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--standalone"]
                          + args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def test_ddp_setup_gloo_all_reduce(tmp_path):
    script = tmp_path / "ddp.py"
    script.write_text(textwrap.dedent("""
        import json, sys, torch, torch.distributed as dist, common
        from training import ddp
        rank, world, local, device = ddp.ddp_setup("cpu")
        x = torch.tensor([float(rank + 1)])
        dist.all_reduce(x)  # 1 + 2
        got = ddp.ddp_gather({"rank": rank})
        common.append_jsonl(sys.argv[1], dict(rank=rank, world=world, local=local, device=device, sum=x.item(),
                                              gathered=[g["rank"] for g in got]))
        ddp.ddp_cleanup()
    """))
    p = torchrun([str(script), str(tmp_path / "out.jsonl")], tmp_path, 120)
    assert p.returncode == 0, p.stderr[-3000:]
    rows = sorted((json.loads(l) for l in open(tmp_path / "out.jsonl")), key=lambda r: r["rank"])
    assert [r["rank"] for r in rows] == [0, 1] and all(r["world"] == 2 and r["device"] == "cpu" for r in rows)
    assert all(r["sum"] == 3.0 and r["gathered"] == [0, 1] for r in rows)


def test_ddp_setup_outside_torchrun():
    from training import ddp
    assert ddp.ddp_setup("cpu") == (0, 1, 0, "cpu") or "RANK" in os.environ
    assert ddp.ddp_gather(5) == [5]


UPDATE = textwrap.dedent("""
    # one GRPO update on 4 fixed completions: the whole batch in one process, or split over 2 ranks as 2 + 2, 3 + 1
    # and 4 + 0 rows (a rank with no rows: all its completions were truncated and masked)
    import sys, torch, rl
    from training import ddp
    from transformers import LlamaConfig, LlamaForCausalLM
    rank, world, _, _ = ddp.ddp_setup("cpu")
    rows = [dict(prompt_ids=[1, 2, 3], completion_ids=[4, 5, 6, 7, 8]), dict(prompt_ids=[9], completion_ids=[10]),
            dict(prompt_ids=[11, 12], completion_ids=[13, 14]),
            dict(prompt_ids=[15, 16, 17, 18], completion_ids=[19, 20, 21])]
    adv = torch.tensor([1.0, -0.5, 2.0, -1.0])
    out = {}
    for lt in ("grpo", "bnpo", "dr_grpo", "dapo"):
        for first in (2, 3, 4):  # rank 0 takes rows[:first], rank 1 the rest
            rl.loss_type, rl.micro_batch_size, rl.num_iterations, rl.beta = lt, 1, 2, 0.1
            rl.max_completion_length, rl.temperature, rl.grad_clip, rl.epsilon, rl.epsilon_high = 8, 1.0, 1e9, 0.2, 0.2
            torch.manual_seed(0)
            cfg = LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                              num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=32)
            model, ref = LlamaForCausalLM(cfg), LlamaForCausalLM(cfg).requires_grad_(False)
            opt = torch.optim.SGD(model.parameters(), lr=1.0)  # plain SGD: a gradient scaled wrong shows (Adam
            #                                                    would hide it)
            mine = (slice(0, first) if rank == 0 else slice(first, 4)) if world == 2 else slice(0, 4)
            stats, n = rl.grpo_update(model, ref, opt, rows[mine], adv[mine], 0, world=world)
            out[lt, first] = dict(params=[p.detach().clone() for p in model.parameters()], n=n,
                                  loss=sum(s["loss"] for s in ddp.ddp_gather(stats)))
    if rank == 0:
        torch.save(out, sys.argv[1])
    ddp.ddp_cleanup()
""")


def test_two_rank_update_equals_one_process_update(tmp_path):
    """Every loss type, with equal ranks, unequal ranks and a rank without rows: the 2-rank update is the 1-process
    update (bnpo, a mean of per-micro-batch token means as in TRL, divides by the micro-batches of all ranks;
    dividing by the rank's own count would weigh the micro-batches of 3 + 1 rows unequally and halve the update
    of 4 + 0)."""
    import torch
    script = tmp_path / "update.py"
    script.write_text(UPDATE)
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1")
    p = subprocess.run([sys.executable, str(script), str(tmp_path / "one.pt")], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    p = torchrun([str(script), str(tmp_path / "two.pt")], tmp_path, 300)
    assert p.returncode == 0, p.stderr[-3000:]
    one, two = torch.load(tmp_path / "one.pt"), torch.load(tmp_path / "two.pt")
    bad = []
    for key in one:
        assert one[key]["n"] == two[key]["n"] == 4
        moved = max((a - b).abs().max().item() for a, b in zip(one[key]["params"], two[key]["params"]))
        if abs(one[key]["loss"] - two[key]["loss"]) > 1e-6 or moved > 1e-5:
            bad.append((key, one[key]["loss"], two[key]["loss"], moved))
    assert not bad, bad
    # and the update did something: the weights differ between loss types
    assert max((a - b).abs().max().item() for a, b in zip(one["grpo", 2]["params"], one["dapo", 2]["params"])) > 1e-4


def test_step_log_of_two_ranks(tmp_path, capsys):
    """The step line over two ranks: generation tokens/s = all ranks' tokens / the slowest rank's generation
    seconds, the larger rank's peak memory, the gradient norm once (the same on every rank after the all-reduce,
    not summed like the loss); on the CPU (no peak) and without training (no norm) the line leaves them out."""
    from training import rl_log

    def rank(r, t_gen, tokens, peak, norm):
        rec = dict(step=0, rank=r, task="t", status="ok", format_error=None, hack=None, speedup=2.0, reward=2.0,
                   reward_norm=0.0, advantage=0.0, truncated=False, completion_len=tokens, completion="", code="")
        stats = dict(loss=0.5, kl=0.0, clip_frac=0.0, entropy=1.0, **({} if norm is None else dict(grad_norm=norm)))
        return dict(recs=[rec], stats=stats, t=(t_gen, 1.0, 1.0), new=0, psum=1.0, gen_tokens=tokens, peak_gib=peak)
    h = rl_log.log_step(str(tmp_path), 0, [rank(0, 2.0, 100, 10.0, 3.0), rank(1, 4.0, 300, 12.5, 3.0)], {"t": 1.0}, 0,
                        0.0)
    assert h["gen_tokens_per_s"] == 100.0 and h["peak_memory_gib"] == 12.5 and h["grad_norm"] == 3.0, h
    assert h["loss"] == 1.0  # (each rank's share, summed)
    assert "| 100 tok/s gen mem 12.5 GiB gnorm 3" in capsys.readouterr().out
    h = rl_log.log_step(str(tmp_path), 1, [rank(0, 2.0, 50, None, None)], {"t": 1.0}, 0, 0.0)
    assert h["peak_memory_gib"] is None and h["grad_norm"] is None and h["gen_tokens_per_s"] == 25.0
    line = capsys.readouterr().out
    assert line.rstrip().endswith("| 25 tok/s gen") and "mem" not in line and "gnorm" not in line, line


def test_generated_tokens_of_a_step():
    from training import rl_log
    batch = lambda *lens: [dict(completion_ids=[0] * n) for n in lens]
    assert rl_log.generated_tokens(batch(3, 4), None, 0) == 7            # synchronous: the batch trained on
    assert rl_log.generated_tokens(batch(3, 4), batch(5), 0) == 12       # async, first step: both batches
    assert rl_log.generated_tokens(batch(3, 4), batch(5), 1) == 5        # async: only the next batch is new


def test_prompts_rounded_up_to_the_ranks(capsys):
    from training import ddp
    assert [ddp.split_prompts(4, w) for w in (1, 2, 4, 8)] == [(4, 4), (4, 2), (4, 1), (8, 1)]
    assert ddp.split_prompts(3, 2, say=True) == (4, 2)
    assert capsys.readouterr().out == "num_prompts=3 rounded up to 4: 2 per rank on 2 ranks\n"
    assert ddp.split_prompts(8, 4, say=True) == (8, 2) and capsys.readouterr().out == ""
