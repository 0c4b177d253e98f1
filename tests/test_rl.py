"""GRPO maths, exemplar sampling, prompt parsing: golden values computed by hand (see the comments)."""
import json
import math
import os
import random
import sys

import pytest
import torch

import common

import prompting
import rl
from training import exemplars, generation, models, rollouts


# --- advantages -------------------------------------------------------------

def test_group_advantages_golden():
    # group 1: rewards 1,2,3 -> mean 2, unbiased std 1 -> (-1, 0, 1) / (1 + 1e-4); group 2: equal rewards -> 0
    r = torch.tensor([1.0, 2.0, 3.0, 5.0, 5.0, 5.0])
    a = rl.group_advantages(r, 3, "group")
    s = 1 / (1 + 1e-4)
    assert torch.allclose(a, torch.tensor([-s, 0.0, s, 0.0, 0.0, 0.0]), atol=1e-7)
    # "none" (Dr. GRPO): only the mean is removed
    assert torch.allclose(rl.group_advantages(r, 3, "none"), torch.tensor([-1.0, 0, 1, 0, 0, 0]))
    # "batch": divided by the unbiased std of all six rewards
    std = torch.tensor([1.0, 2, 3, 5, 5, 5]).std().item()
    assert torch.allclose(rl.group_advantages(r, 3, "batch"), torch.tensor([-1.0, 0, 1, 0, 0, 0]) / (std + 1e-4))


def test_zero_spread_group_gives_zero_advantage():
    r = torch.tensor([0.0, 0.0, 0.0, 0.0, 1.3, 1.3, 1.3, 1.3])
    assert torch.equal(rl.group_advantages(r, 4, "group"), torch.zeros(8))


def test_group_of_one_gives_zero_advantage_not_nan():
    # G = 1: no other sample to compare with, so no signal: 0 for every scale (the unbiased std of one value is NaN)
    r = torch.tensor([0.0, 1.5, 3.0])
    for scale in ("group", "batch", "none"):
        assert torch.equal(rl.group_advantages(r, 1, scale), torch.zeros(3)), scale
    # a batch of one group of one
    assert torch.equal(rl.group_advantages(torch.tensor([2.0]), 1, "batch"), torch.zeros(1))


def test_normalise_and_clip_golden():
    # mean 1, population std 1 -> (-1, 1); clipped at 0.5
    assert torch.allclose(rl.normalise_rewards(torch.tensor([0.0, 2.0]), 1.5), torch.tensor([-1.0, 1.0]))
    assert torch.allclose(rl.normalise_rewards(torch.tensor([0.0, 2.0]), 0.5), torch.tensor([-0.5, 0.5]))
    # a 100x outlier is clipped to 1.5 (the paper's guard against a hacked or lucky huge speedup)
    out = rl.normalise_rewards(torch.tensor([1.0, 1.0, 1.0, 100.0]), 1.5)
    assert out[-1].item() == pytest.approx(1.5) and out[0].item() < 0
    assert torch.equal(rl.normalise_rewards(torch.tensor([3.0, 4.0]), 0.0), torch.tensor([3.0, 4.0]))


def test_reward_norm_group_keeps_a_fast_tasks_ordering():
    # the motivating example: one task whose 4 samples all run 4.5-5.5x next to 4 tasks whose samples all fail (0).
    fast, fail = [4.5, 4.9, 5.1, 5.5], [0.0] * 16
    r = torch.tensor(fast + fail)
    # batch (today): mean 1, population std sqrt(100.52 / 20 - 1) = 2.00649; z(4.5) = 3.5 / 2.00649 = 1.744 > 1.5, so
    # all four fast samples clip to 1.5 and the task's best kernel gets the same advantage as its worst: 0
    b = rl.normalise_rewards(r, 1.5, "batch", 4)
    assert torch.allclose(b[:4], torch.full((4,), 1.5))
    assert torch.allclose(b[4:], torch.full((16,), -1 / 2.00649), atol=1e-5)
    assert torch.equal(rl.group_advantages(b, 4, "group")[:4], torch.zeros(4))
    # group: mean 5, population std sqrt(0.52 / 4) = 0.360555 inside the fast task
    # -> z = (-0.5, -0.1, 0.1, 0.5) / 0.360555
    # = (-1.38675, -0.27735, 0.27735, 1.38675), none clipped; a group of equal rewards -> 0
    g = rl.normalise_rewards(r, 1.5, "group", 4)
    assert torch.allclose(g[:4], torch.tensor([-1.38675, -0.27735, 0.27735, 1.38675]), atol=1e-5)
    assert torch.equal(g[4:], torch.zeros(16))
    # then GRPO's group advantage: unbiased std of z = sqrt(4 / 3) -> z / 1.1547 (the 1e-4 of the std is kept)
    a = rl.group_advantages(g, 4, "group")
    want = torch.tensor([-1.38675, -0.27735, 0.27735, 1.38675]) / (2 / 3 ** 0.5 + 1e-4)
    assert torch.allclose(a[:4], want, atol=1e-5)
    assert a[0] < a[1] < a[2] < a[3]  # the ordering inside the task survives


def test_reward_norm_group_clips_inside_each_group():
    # [0, 0, 0, 10]: mean 2.5, population std sqrt(18.75) = 4.33013 -> (-0.57735 x 3, 1.73205), clipped at 1.5;
    # the second group [1, 3]x2 has mean 2, std 1 -> (-1, 1, -1, 1)
    r = torch.tensor([0.0, 0.0, 0.0, 10.0, 1.0, 3.0, 1.0, 3.0])
    g = rl.normalise_rewards(r, 1.5, "group", 4)
    assert torch.allclose(g, torch.tensor([-0.57735, -0.57735, -0.57735, 1.5, -1.0, 1.0, -1.0, 1.0]), atol=1e-5)
    # clip=0 disables both
    assert torch.equal(rl.normalise_rewards(r, 0.0, "group", 4), r)
    with pytest.raises(ValueError, match="reward_norm"):
        rl.normalise_rewards(r, 1.5, "task", 4)


# --- loss -------------------------------------------------------------------

def _batch():
    # two sequences, 3 token slots; seq 0 has 2 tokens, seq 1 has 1 token; on-policy (ratio 1)
    logp = torch.log(torch.tensor([[0.5, 0.25, 0.9], [0.1, 0.9, 0.9]]))
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    adv = torch.tensor([1.0, -3.0])
    return logp, mask, adv


@pytest.mark.parametrize("loss_type,expected", [
    ("grpo", 1.0),        # per-token loss -A: seq0 mean -1, seq1 mean 3 -> (-1 + 3) / 2
    ("bnpo", 1 / 3),      # (-1 - 1 + 3) / 3 tokens
    ("dr_grpo", 0.125),   # (-1 - 1 + 3) / (2 sequences * 4 max_completion_length)
    ("dapo", 1 / 3),      # (-1 - 1 + 3) / 3 tokens of the whole batch
])
def test_loss_types_golden(loss_type, expected):
    logp, mask, adv = _batch()
    loss, st = rl.grpo_loss(logp, logp.detach(), adv, mask, loss_type=loss_type, max_completion_length=4)
    assert loss.item() == pytest.approx(expected, abs=1e-6)
    assert st["clip_frac"] == 0.0 and st["kl"] == 0.0


def test_micro_batch_shares_add_up_to_full_batch():
    logp, mask, adv = _batch()
    for lt in ("grpo", "dr_grpo", "dapo"):
        full, _ = rl.grpo_loss(logp, logp, adv, mask, loss_type=lt, max_completion_length=4)
        parts = sum(rl.grpo_loss(logp[i:i + 1], logp[i:i + 1], adv[i:i + 1], mask[i:i + 1], loss_type=lt,
                                 max_completion_length=4, num_sequences=2, num_tokens=3)[0] for i in range(2))
        assert parts.item() == pytest.approx(full.item(), abs=1e-6), lt


def _update(loss_type, rows, adv, **kw):
    """One grpo_update of a fixed tiny model with plain SGD (lr 1, no clipping): (stats, n_rows, weight change)."""
    from transformers import LlamaConfig, LlamaForCausalLM
    rl.loss_type, rl.micro_batch_size, rl.num_iterations, rl.beta = loss_type, 1, 1, 0.0
    rl.max_completion_length, rl.temperature, rl.grad_clip, rl.epsilon, rl.epsilon_high = 4, 1.0, 1e9, 0.2, 0.2
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=32))
    before = [p.detach().clone() for p in model.parameters()]
    stats, n = rl.grpo_update(model, None, torch.optim.SGD(model.parameters(), lr=1.0), rows, adv, 0, **kw)
    return stats, n, [p.detach() - b for p, b in zip(model.parameters(), before)]


def test_truncated_completions_stay_in_the_row_count():
    # 4 completions, 2 truncated and masked (mask_truncated_completions): TRL keeps them in B with a zero mask, so
    # grpo and dr_grpo divide by B = 4, not by the 2 rows trained on (else the step would grow with the
    # truncation rate). Kept rows: 2 tokens with A = 1, 1 token with A = -3; on-policy, so every per-token loss is -A:
    #   grpo: (mean(-1, -1) + mean(3)) / B = (-1 + 3) / 4 = 0.5;   dr_grpo: (-1 - 1 + 3) / (B * 4) = 1 / 16;
    #   dapo: the token mean (-1 - 1 + 3) / 3; bnpo (micro_batch_size 1): the mean of the rows' token means,
    #   (mean(-1, -1) + mean(3)) / 2 = 1; neither depends on B.
    rows = [dict(prompt_ids=[1, 2], completion_ids=[3, 4]), dict(prompt_ids=[5], completion_ids=[6])]
    adv = torch.tensor([1.0, -3.0])
    for lt, golden, scale in (("grpo", 0.5, 0.5), ("dr_grpo", 1 / 16, 0.5), ("dapo", 1 / 3, 1.0), ("bnpo", 1.0, 1.0)):
        stats, n, delta = _update(lt, rows, adv, num_masked=2)
        assert n == 2 and stats["loss"] == pytest.approx(golden, abs=1e-6), (lt, stats)
        # the same rows without the 2 masked ones: grpo and dr_grpo steps twice as large (plain SGD: delta ~ grad)
        _, _, full = _update(lt, rows, adv)
        for d, f in zip(delta, full):
            assert torch.allclose(d, scale * f, atol=1e-6), lt
    # every completion truncated: nothing to train on, and no optimizer step (Adam would still move the weights)
    stats, n, delta = _update("grpo", [], torch.zeros(0), num_masked=4)
    assert n == 0 and all(d.abs().max() == 0 for d in delta)


def test_clipping_golden():
    # one token each; old_logp = 0 so ratio = exp(logp)
    logp = torch.log(torch.tensor([[1.5], [1.5], [0.5], [0.5]]))
    old = torch.zeros_like(logp)
    mask = torch.ones_like(logp)
    adv = torch.tensor([1.0, -1.0, -1.0, 1.0])
    # A=1, r=1.5: -min(1.5, 1.2) = -1.2 (clipped); A=-1, r=1.5: -min(-1.5, -1.2) = 1.5 (not clipped);
    # A=-1, r=0.5: -min(-0.5, -0.8) = 0.8 (clipped); A=1, r=0.5: -min(0.5, 0.8) = -0.5 (not clipped)
    loss, st = rl.grpo_loss(logp, old, adv, mask, epsilon=0.2, epsilon_high=0.2, loss_type="grpo")
    assert loss.item() == pytest.approx((-1.2 + 1.5 + 0.8 - 0.5) / 4, abs=1e-6)
    assert st["clip_frac"] == pytest.approx(0.5)
    # a wider upper clip (DAPO's clip-higher) lets the first token's ratio through: -1.5
    loss2, _ = rl.grpo_loss(logp[:1], old[:1], adv[:1], mask[:1], epsilon=0.2, epsilon_high=0.6)
    assert loss2.item() == pytest.approx(-1.5, abs=1e-6)


def test_staleness_correction_golden():
    # async_rollouts: the ratio is taken to the log-probs recorded when the rows were generated (old_logp), and
    # clipped as in PPO. Recorded probabilities 0.5 / 0.25 / 0.5 / 0.5; the policy now gives 0.55 / 0.45 / 0.9 / 0.3:
    #   row 0, A = +1: ratios 1.1 and 1.8 -> -min(1.1, 1.1) = -1.1; -min(1.8, 1.2) = -1.2 (clipped: no gradient)
    #   row 1, A = -1: ratio 1.8 -> -min(-1.8, -1.2) = 1.8 (the pessimistic side: not clipped)
    #   row 2, A = -1: ratio 0.6 -> -min(-0.6, -0.8) = 0.8 (clipped)
    # grpo: (mean(-1.1, -1.2) + 1.8 + 0.8) / 3 = 0.48333; clip_frac 2 of 4 tokens
    rows = [dict(prompt_ids=[1], completion_ids=[5, 6], old_logp=[math.log(0.5), math.log(0.25)]),
            dict(prompt_ids=[2], completion_ids=[7], old_logp=[math.log(0.5)]),
            dict(prompt_ids=[3], completion_ids=[8], old_logp=[math.log(0.5)])]
    old = rollouts.behaviour_logp(rows)
    assert old.shape == (3, 2) and old[1, 1] == 0 and old[0, 1].item() == pytest.approx(math.log(0.25))
    logp = torch.log(torch.tensor([[0.55, 0.45], [0.9, 1.0], [0.3, 1.0]])).requires_grad_(True)
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0], [1.0, 0.0]])
    loss, st = rl.grpo_loss(logp, old, torch.tensor([1.0, -1.0, -1.0]), mask, epsilon=0.2, epsilon_high=0.2)
    assert loss.item() == pytest.approx((-1.15 + 1.8 + 0.8) / 3, abs=1e-5) and st["clip_frac"] == 0.5
    loss.backward()
    # d(-ratio * A)/d logp = -ratio * A where not clipped, over (tokens of the row * B): -1.1 / 6 and 1.8 / 3
    assert torch.allclose(logp.grad, torch.tensor([[-1.1 / 6, 0.0], [1.8 / 3, 0.0], [0.0, 0.0]]), atol=1e-5)
    # rows without a record (synchronous rollouts): no behaviour log-probs
    assert rollouts.behaviour_logp([dict(prompt_ids=[1], completion_ids=[2])]) is None


def test_recorded_logp_of_the_same_weights_is_on_policy():
    # old_logp recorded by the weights that are then trained: the ratio is 1 and the update is the on-policy one;
    # recorded by other weights (one step stale), the update differs
    rows = [dict(prompt_ids=[1, 2, 3], completion_ids=[4, 5, 6, 7]), dict(prompt_ids=[8], completion_ids=[9, 10])]
    adv = torch.tensor([1.0, -2.0])
    _, _, on_policy = _update("grpo", rows, adv)
    torch.manual_seed(0)  # _update's model, to record with
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                      num_key_value_heads=2, max_position_embeddings=32)
    same = LlamaForCausalLM(cfg)
    recorded = [dict(r) for r in rows]
    rollouts.record_behaviour_logp(same, recorded, 0, temperature=1.0, micro_batch_size=2, chunk_size=512)
    assert [len(r["old_logp"]) for r in recorded] == [4, 2]
    _, _, delta = _update("grpo", recorded, adv)
    assert all(torch.allclose(d, o, atol=1e-6) for d, o in zip(delta, on_policy))
    stale = [dict(r) for r in rows]
    rollouts.record_behaviour_logp(LlamaForCausalLM(cfg), stale, 0, temperature=1.0, micro_batch_size=2,
                                   chunk_size=512)  # other weights
    _, _, delta = _update("grpo", stale, adv)
    assert max((d - o).abs().max().item() for d, o in zip(delta, on_policy)) > 1e-4


def test_k3_kl():
    logp = torch.tensor([[0.0, -1.0, -2.0]])
    mask = torch.ones_like(logp)
    # zero at equality
    _, st = rl.grpo_loss(logp, logp, torch.zeros(1), mask, ref_logp=logp.clone(), beta=0.1)
    assert st["kl"] == 0.0
    # ref - logp = 1 on every token: e - 1 - 1 = 0.71828...; loss = beta * kl since A = 0
    loss, st = rl.grpo_loss(logp, logp, torch.zeros(1), mask, ref_logp=logp + 1, beta=0.1)
    assert st["kl"] == pytest.approx(math.e - 2, abs=1e-6)
    assert loss.item() == pytest.approx(0.1 * (math.e - 2), abs=1e-6)
    # never negative
    d = torch.linspace(-5, 5, 101)[None]
    _, st = rl.grpo_loss(torch.zeros_like(d), torch.zeros_like(d), torch.zeros(1), torch.ones_like(d),
                         ref_logp=d, beta=1.0)
    assert st["kl"] >= 0


def test_loss_gradient_is_policy_gradient():
    # on-policy, grpo: d loss / d logp_t = -A / (n_tokens of the sequence * B)
    logp, mask, adv = _batch()
    logp = logp.clone().requires_grad_(True)
    loss, _ = rl.grpo_loss(logp, logp.detach(), adv, mask, loss_type="grpo")
    loss.backward()
    expected = torch.tensor([[-1 / 2 / 2, -1 / 2 / 2, 0.0], [3 / 1 / 2, 0.0, 0.0]])
    assert torch.allclose(logp.grad, expected)


# --- exemplar sampling ------------------------------------------------------

def test_bucket_sampling_distribution():
    # buckets of width 0.5: [0.1, 0.2] -> bucket 0 (mean 0.15); [1.1] -> bucket 2 (mean 1.1); [2.2, 2.3] -> bucket 4
    entries = [dict(code=str(s), speedup=s) for s in (0.1, 0.2, 1.1, 2.2, 2.3)]
    means = [0.15, 1.1, 2.25]
    mu = sum(means) / 3
    w = [math.exp(m - mu) for m in means]  # tau = 1
    # P(pair of buckets {i, j}) = p_i * p_j/(1-p_i) + p_j * p_i/(1-p_j), drawn without replacement
    p = [x / sum(w) for x in w]
    pair = lambda i, j: p[i] * p[j] / (1 - p[i]) + p[j] * p[i] / (1 - p[j])
    expected = {frozenset({0, 1}): pair(0, 1), frozenset({0, 2}): pair(0, 2), frozenset({1, 2}): pair(1, 2)}
    bucket_of = {0.1: 0, 0.2: 0, 1.1: 1, 2.2: 2, 2.3: 2}
    rng = random.Random(0)
    n = 20000
    counts = {k: 0 for k in expected}
    within = {0.1: 0, 0.2: 0}
    for _ in range(n):
        ex = exemplars.sample_exemplars(entries, 2, rng, "bucket", 0.5, 1.0)
        b = frozenset(bucket_of[e["speedup"]] for e in ex)
        assert len(b) == 2, "two exemplars must come from distinct buckets"
        counts[b] += 1
        for e in ex:
            if e["speedup"] in within:
                within[e["speedup"]] += 1
    # chi-square goodness of fit, 2 degrees of freedom: 13.8 is the 0.999 quantile
    chi2 = sum((counts[k] - n * expected[k]) ** 2 / (n * expected[k]) for k in expected)
    assert chi2 < 13.8, (counts, expected)
    # uniform inside a bucket
    assert abs(within[0.1] - within[0.2]) < 4 * math.sqrt(within[0.1] + within[0.2])


def test_bucket_sampling_extreme_spread_does_not_overflow():
    # buckets at 1x and 1000x, tau = 0.01: exp((1000 - 500.5) / 0.01) overflows a float; the softmax must subtract
    # the max instead (the same distribution). Two buckets, two exemplars: both, the 1000x one first.
    entries = [dict(code="slow", speedup=1.0), dict(code="slow2", speedup=1.01), dict(code="fast", speedup=1000.0)]
    rng = random.Random(0)
    for _ in range(20):
        ex = exemplars.sample_exemplars(entries, 2, rng, "bucket", 0.25, 0.01)
        assert ex[0]["code"] == "fast" and ex[1]["code"] in ("slow", "slow2")
    # three buckets 1x, 2x, 1000x: the first draw is 1000x; the second, among the rest, is 2x with probability
    # 1 / (1 + exp(-100)) = 1 in float64 (the remaining weights are renormalised, not left at exp(-99850) = 0)
    entries = [dict(code=c, speedup=s) for c, s in (("a", 1.0), ("b", 2.0), ("c", 1000.0))]
    for _ in range(20):
        assert [e["code"] for e in exemplars.sample_exemplars(entries, 2, rng, "bucket", 0.25, 0.01)] == ["c", "b"]
    # and a low tau with all three wanted still returns three distinct kernels
    four = entries + [dict(code="d", speedup=5.0)]
    assert sorted(e["code"] for e in exemplars.sample_exemplars(four, 3, rng, "bucket", 0.25, 0.001)) == ["b", "c", "d"]


def test_exemplar_fallbacks():
    rng = random.Random(0)
    one = [dict(code="a", speedup=1.0)]
    assert exemplars.sample_exemplars(one, 2, rng) == one  # fewer kernels than asked: all of them
    assert exemplars.sample_exemplars(one * 3, 0, rng) == []  # num_exemplars=0: vanilla GRPO
    same = [dict(code=c, speedup=1.0) for c in "abc"]  # one bucket only: still two distinct kernels
    ex = exemplars.sample_exemplars(same, 2, rng)
    assert len(ex) == 2 and ex[0] is not ex[1]


# --- prompts and extraction -------------------------------------------------

ANSWER = prompting.format_response("A is faster.", "Fuse.", "import torch\nclass ModelNew(torch.nn.Module):\n    pass")


def test_extract_code_ok():
    code, err = prompting.extract_code(ANSWER)
    assert err is None and code.startswith("import torch") and "class ModelNew" in code


@pytest.mark.parametrize("text,reason", [
    (ANSWER.replace("## Algorithm Design", "## Design"), "missing section"),
    ("## Algorithm Design\nx\n## Performance Analysis\ny\n## Code Implementation\n```python\nclass ModelNew: pass\n```",
     "out of order"),
    (ANSWER.split("```python")[0], "no ```python block"),
    (ANSWER.replace("class ModelNew", "class Model2"), "ModelNew"),
    ("", "missing section"),
])
def test_extract_code_format_errors(text, reason):
    code, err = prompting.extract_code(text)
    assert code is None and reason in err


MODULE = ("import torch\nfrom torch.utils.cpp_extension import load_inline\n\n"
          "class ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n")
CPP = '#include <torch/extension.h>\n__global__ void k(float* x) { x[0] = 1.0f; }\n'
HEAD = ("## Performance Analysis\nThe reference is memory bound.\n\n## Algorithm Design\nFuse the ops.\n\n"
        "## Code Implementation\n")


@pytest.mark.parametrize("name,answer", [
    # the CUDA source first, then the module, prose between (the prose must not be taken as code)
    ("cpp_first", HEAD + "The kernel:\n```cpp\n" + CPP + "```\nNow the Python side, which loads it:\n```python\n"
     + MODULE + "```\nThis should be faster.\n"),
    ("Python_tag", HEAD + "```Python\n" + MODULE + "```\n"),
    ("py_tag", HEAD + "```py\n" + MODULE + "```\n"),
    ("python3_tag_spaced", HEAD + "``` python3\n" + MODULE + "```\n"),
    ("untagged", HEAD + "```\n" + MODULE + "```\n"),
    # several blocks in any order and case: a shell line, CUDA, the module, then a test harness longer than the
    # module that does not define ModelNew (it must not win by length)
    ("many_blocks", HEAD + "Build with:\n```bash\npip install ninja\n```\n```CUDA\n" + CPP + "```\n```python\n"
     + MODULE + "```\nTo check it:\n```python\n" + "import torch\n" + "x = torch.randn(4)\n" * 40
     + "print(ModelNew()(x))\n```\n"),
    # prose that mentions `class ModelNew` outside any block is never code
    ("prose_mentions", HEAD + "Below, class ModelNew wraps the kernel.\n```cuda\n" + CPP + "```\nand\n```python\n"
     + MODULE + "```\n"),
    ("tildes_and_long_fence", HEAD + "~~~cpp\n" + CPP + "~~~\n````python\n" + MODULE + "````\n"),
], ids=lambda x: x if len(x) < 30 else "")
def test_extract_code_llm_style_answers(name, answer):
    code, err = prompting.extract_code(answer)
    assert err is None, (name, err)
    assert code == MODULE, (name, code)


@pytest.mark.parametrize("answer,reason", [
    (HEAD + "```cpp\n" + CPP + "```\nThen in Python, class ModelNew loads it.\n", "no ```python block"),
    (HEAD + "```python\nimport torch\nx = 1\n```\n```cpp\nclass ModelNew {};\n```\n", "ModelNew"),
    (HEAD + "```python\n" + MODULE, "no ```python block"),  # truncated: the block never closes
], ids=["cpp_only", "ModelNew_only_in_cpp", "unclosed"])
def test_extract_code_no_usable_module(answer, reason):
    code, err = prompting.extract_code(answer)
    assert code is None and reason in err, err


def test_contrastive_prompt_has_exemplars_and_rules():
    p = prompting.contrastive_prompt("class Model: pass", [("code A", 1.234), ("code B", 0.5)], "NVIDIA H200")
    assert "speedup 1.23x" in p and "speedup 0.50x" in p and "NVIDIA H200" in p
    assert all(h in p for h in prompting.SECTIONS)
    assert "Do not cache" in p and "hyperparameters" in p
    assert "Earlier implementations" not in prompting.contrastive_prompt("class Model: pass", [], "X")


def test_contrastive_prompt_carries_table_3():
    """Every element of CUDA-L1's Table 3 (REFERENCE.md §1.3), in our words: the five analysis questions,
    the requirements (builds and runs on current GPUs; a mismatch scores zero; a full ModelNew module), the two
    restrictions and the three '## ' sections."""
    p = prompting.contrastive_prompt("class Model: pass", [("code A", 1.5), ("code B", 0.9)], "NVIDIA H200")
    low = p.lower()
    questions = {
        "which is faster and why": "which one is fastest, and why",
        "what limits them": "bottlenecks limit",
        "unused techniques": "none of them uses yet",
        "most potential": "hold the most potential",
        "largest remaining opportunity": "largest remaining opportunity",
    }
    requirements = {
        "builds and runs on current GPUs": "must build and run as written on current gpus",
        "the target GPU": "timed on the nvidia h200",
        "a mismatch scores zero": "does not match the reference scores zero",
        "a complete module": "one complete python module",
        "no caching": "do not cache",
        "no hyperparameter changes": "do not change the hyperparameters",
    }
    missing = [k for k, v in {**questions, **requirements}.items() if v not in low]
    assert not missing, missing
    assert all(f"\n{h}\n" in p for h in prompting.SECTIONS)  # the three "## " sections, each on its own line
    # the five questions sit in the Performance Analysis section's instructions, in order
    pos = [low.index(v) for v in questions.values()]
    assert pos == sorted(pos) and pos[0] > low.index("## performance analysis")
    assert pos[-1] < low.index("## algorithm design")


def test_parse_variant_strips_metadata():
    code, meta = prompting.parse_variant("# @expect: wrong\n# @design: d\nimport torch\n# @not: meta\n")
    assert meta == {"expect": "wrong", "design": "d"} and code == "import torch\n# @not: meta\n"


def test_configure_overrides_and_errors():
    g = dict(lr=1e-3, steps=10, name="x", flag=False, device="cuda", arch="8.0", gpu_name="A", gpu="a100")
    common.configure(g, ["--lr=0.5", "--steps", "3", "--name=abc", "--flag", "--gpu=h200"])
    assert g["lr"] == 0.5 and g["steps"] == 3 and g["name"] == "abc" and g["flag"] is True
    assert g["arch"] == "9.0" and g["gpu_name"] == "NVIDIA H200" and g["gpu"] == "h200"
    cpu = dict(device="cuda", gpu_name="NVIDIA A100")
    common.configure(cpu, ["--device=cpu"])  # the candidates run on the CPU: so does the prompt's task
    assert cpu["gpu_name"] == "CPU"
    common.configure(cpu, ["--device=cpu", "--gpu_name=NVIDIA H200"])  # unless a name is given
    assert cpu["gpu_name"] == "NVIDIA H200"
    with pytest.raises(SystemExit):
        common.configure(g, ["--nope=1"])
    with pytest.raises(SystemExit):
        common.configure(g, ["--steps=abc"])
    with pytest.raises(SystemExit):
        common.configure(g, ["--gpu=tpu"])


# --- log-probs and generation -----------------------------------------------

def _tiny():
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=128)
    return LlamaForCausalLM(cfg).eval()


def test_completion_logp_matches_unpadded_forward():
    # left padding + position ids from the mask must give the same log-probs as each sequence alone
    model = _tiny()
    rows = [dict(prompt_ids=[1, 2, 3, 4, 5], completion_ids=[6, 7, 8]),
            dict(prompt_ids=[9, 10], completion_ids=[11, 12, 13, 14, 15])]
    logp, ent, mask = models.completion_logp(model, rows, pad_id=0, temp=1.0)
    assert mask.tolist() == [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]
    for i, r in enumerate(rows):
        ids = torch.tensor([r["prompt_ids"] + r["completion_ids"]])
        lsm = torch.log_softmax(model(input_ids=ids).logits[0].float(), -1)
        P = len(r["prompt_ids"])
        ref = torch.stack([lsm[P - 1 + t, c] for t, c in enumerate(r["completion_ids"])])
        assert torch.allclose(logp[i, :len(ref)], ref, atol=1e-5)
    assert (ent >= 0).all()


def _full_vocab_logp(model, rows, pad_id, temp):
    """completion_logp without chunking: the whole (B, C, V) fp32 log-softmax, entropy from it."""
    ids, att, P = models.pad_rows(rows, pad_id)  # (B, P + C) each
    C = ids.shape[1] - P
    pos = (att.cumsum(-1) - 1).clamp(min=0)
    logits = model(input_ids=ids, attention_mask=att, position_ids=pos).logits[:, P - 1:P + C - 1].float() / temp
    lsm = torch.log_softmax(logits, dim=-1)
    logp = lsm.gather(-1, ids[:, P:].unsqueeze(-1)).squeeze(-1)
    ent = -(lsm.exp() * lsm).sum(-1)
    return logp, ent.detach(), att[:, P:].float()


@pytest.mark.parametrize("chunk_size", [1, 2, 3, 7, 0])
def test_chunked_logp_equals_full_vocab_logp(chunk_size):
    # log-probs and entropies per chunk of the sequence (logsumexp, the chosen token's logit; the chunk's
    # logits recomputed in backward) equal the full-vocabulary log-softmax within 1e-5, and so do the gradients;
    # rows of different prompt and completion lengths (left- and right-padding), temperature 0.7
    model = _tiny()
    rows = [dict(prompt_ids=[1, 2, 3, 4, 5], completion_ids=[6, 7, 8]),
            dict(prompt_ids=[9, 10], completion_ids=[11, 12, 13, 14, 15, 16, 17]),
            dict(prompt_ids=[18], completion_ids=[19])]
    w = torch.randn(3, 7)  # an arbitrary weighting of the tokens: the gradient of sum(w * logp * mask)
    ref_logp, ref_ent, ref_mask = _full_vocab_logp(model, rows, 0, 0.7)
    (w * ref_logp * ref_mask).sum().backward()
    ref_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    logp, ent, mask = models.completion_logp(model, rows, pad_id=0, temp=0.7, chunk_size=chunk_size)
    assert torch.equal(mask, ref_mask) and logp.shape == ent.shape == (3, 7)
    m = mask.bool()
    assert torch.allclose(logp[m], ref_logp[m], atol=1e-5) and torch.allclose(ent[m], ref_ent[m], atol=1e-5)
    (w * logp * mask).sum().backward()
    for p, g in zip(model.parameters(), ref_grads):
        assert torch.allclose(p.grad, g, atol=1e-5), (chunk_size, (p.grad - g).abs().max())
    with torch.no_grad():  # the no-grad path (old and reference log-probs) too
        assert torch.allclose(models.completion_logp(model, rows, 0, 0.7, chunk_size=chunk_size)[0][m], ref_logp[m],
                              atol=1e-5)


def test_generate_keeps_eos_when_pad_is_eos(monkeypatch):
    class Tok:
        eos_token_id = pad_token_id = 0
        chat_template = None
        padding_side = "right"

        def __call__(self, texts, **kw):
            ids = torch.tensor([[5, 6]] * len(texts))
            enc = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}

            class E(dict):
                def to(self, d):
                    return self
            return E(enc)

        def decode(self, ids, skip_special_tokens=True):
            return " ".join(map(str, ids))

    model = _tiny()
    # row 0 ends with EOS then pad (= EOS); row 1 never emits EOS (truncated)
    monkeypatch.setattr(model, "generate", lambda **kw: torch.tensor([[5, 6, 7, 8, 0, 0], [5, 6, 7, 8, 9, 10]]))
    out = list(generation.generate(model, Tok(), ["p"], 2, 4))
    assert out[0]["completion_ids"] == [7, 8, 0] and not out[0]["truncated"]
    assert out[1]["completion_ids"] == [7, 8, 9, 10] and out[1]["truncated"]


# --- cold-start database, vLLM conversion, throughput script ----------------

def test_load_database_merges_db_and_seed_rows(tmp_path):
    # db.json from prepare.py, seed.jsonl with one kernel already in db.json, one imported correct kernel and one
    # wrong kernel: the database holds each correct kernel once (step -1), the cache holds every seed result
    ok = dict(status="ok", speedup=1.5)
    (tmp_path / "db.json").write_text(json.dumps({"t1": [dict(code="A", speedup=1.5, step=-1, source="variant:a")]}))
    rows = [dict(task="t1", code="A", correct=True, speedup=1.5, result=ok, variant="a"),
            dict(task="t1", code="B", correct=True, speedup=2.0, result=dict(ok, speedup=2.0), source="cudal1:a100"),
            dict(task="t2", code="C", correct=False, speedup=None, result=dict(status="incorrect"), variant="c")]
    (tmp_path / "seed.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    db, cache = exemplars.load_database(str(tmp_path), ["t1", "t2"])
    assert [(e["code"], e["speedup"], e["step"], e["source"]) for e in db["t1"]] == \
        [("A", 1.5, -1, "variant:a"), ("B", 2.0, -1, "cudal1:a100")]
    assert db["t2"] == []
    assert cache[exemplars.kernel_key("t2", "C")]["status"] == "incorrect" and len(cache) == 3


def test_vllm_available_finds_the_package_without_importing_it(tmp_path, monkeypatch):
    # a `vllm` package on the path whose import would fail: found (True), and not imported
    (tmp_path / "vllm").mkdir()
    (tmp_path / "vllm" / "__init__.py").write_text("raise ImportError('vllm_available imported the package')\n")
    monkeypatch.delitem(sys.modules, "vllm", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert generation.vllm_available() is True
    assert "vllm" not in sys.modules
    # a package Python is told is absent (None in sys.modules): False
    monkeypatch.setitem(sys.modules, "vllm", None)
    assert generation.vllm_available() is False


def test_steps_per_hour_script(tmp_path):
    import subprocess
    import sys
    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps(dict(step=i, t_step=s, world_size=2)) + "\n" for i, s in enumerate([60, 30, 30])))
    p = subprocess.run([sys.executable, "scripts/steps_per_hour.py", str(log)], capture_output=True, text=True,
                       cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert p.returncode == 0, p.stderr
    # (60 + 30 + 30) / 3 = 40 s/step -> 90 steps/hour; without step 0: 30 s/step -> 120 steps/hour
    assert "world_size 2, 3 steps, 40.0 s/step, 90 steps/hour; without step 0: 30.0 s/step, 120 steps/hour" in p.stdout
    assert "per step" not in p.stdout                                 # no new_kernels in this log: no breakdown
    rows = [dict(t_gen=1.0, t_eval=e, t_train=0.5, new_kernels=k) for e, k in [(0.0, 0), (20.0, 1), (13.0, 1)]]
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    p = subprocess.run([sys.executable, "scripts/steps_per_hour.py", str(log)], capture_output=True, text=True,
                       cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    # eval (0 + 20 + 13) / 3 = 11.0 s per step; 33 s over 2 new kernels = 16.5 s each
    want = "per step: gen 1.0 s, eval 11.0 s, train 0.5 s; 2 new kernels, 16.5 s of evaluation each"
    assert want in p.stdout, p.stdout


def test_step_summary_by_hand():
    """rl_log.step_summary: the numbers of one log line from four sample records, computed by hand."""
    from training import rl_log
    rec = lambda task, status, sp, reward, n, tr: dict(task=task, status=status, speedup=sp, reward=reward,
                                                        completion_len=n, truncated=tr)
    recs = [rec("a", "ok", 3.0, 3.0, 10, False), rec("a", "incorrect", None, 0.0, 20, False),
            rec("b", "ok", 1.0, 1.0, 30, True), rec("b", "format_error", None, 0.0, 40, False)]
    h = rl_log.step_summary(7, recs, {"a": 2.0, "b": 1.0}, dict(loss=0.5))
    assert h["step"] == 7 and h["loss"] == 0.5
    assert h["reward"] == 1.0 and h["speedup_all"] == 1.0            # (3 + 0 + 1 + 0) / 4; (3 + 1) / 4
    assert (h["speedup_mean"], h["speedup_median"], h["speedup_max"]) == (2.0, 3.0, 3.0)   # of [1, 3]
    assert h["frac_of_best"] == (3 / 2 + 0 + 1 / 1 + 0) / 4
    assert (h["ok"], h["incorrect"], h["format_error"], h["crash"]) == (0.5, 0.25, 0.25, 0.0)
    assert h["completion_len"] == 25.0 and h["truncated"] == 0.25


def test_cpu_prompt_describes_the_cpu_task():
    """gpu_name "CPU" (the CPU presets): the prompt asks for PyTorch or C++ timed on the CPU, never for a GPU or
    CUDA kernels; a GPU name keeps the CUDA prompt."""
    for text in (prompting.contrastive_prompt("class Model: pass", [("x = 1", 1.5), ("x = 2", 2.5)], "CPU"),
                 prompting.contrastive_prompt("class Model: pass", [], "CPU"),
                 prompting.stage1_prompt("class Model: pass", "CPU")):
        assert "optimising PyTorch for the CPU" in text and "GPU" not in text and "CUDA" not in text, text
    gpu = prompting.contrastive_prompt("class Model: pass", [("x = 1", 1.5)], "NVIDIA H200")
    assert "optimising for the NVIDIA H200 GPU" in gpu and "custom CUDA kernels" in gpu and "CPU" not in gpu
