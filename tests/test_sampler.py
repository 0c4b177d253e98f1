"""training/sampler.py: the truncated importance-sampling (TIS) weight and its place in the GRPO loss (golden values
by hand), the sampling copy's in-place refresh, and the static and continuous engines' rows on a tiny model (their
sampler_logp against the trainer's completion_logp). The bf16 figures on a GPU are in test_sampler_gpu below."""
import math

import pytest
import torch

import rl
from training import rollouts, sampler
from training.models import completion_logp


def _tiny_qwen(vocab=64, eos=1):
    from transformers import Qwen2Config, Qwen2ForCausalLM
    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512, eos_token_id=eos,
                      pad_token_id=0, bos_token_id=eos, tie_word_embeddings=True)
    return Qwen2ForCausalLM(cfg)


class _Tok:
    """A character tokenizer: 'a'..'z' -> 3..28, pad 0, EOS 1, left padding as tokenizers do it."""
    eos_token_id, pad_token_id, chat_template, padding_side = 1, 0, None, "left"

    def encode(self, text):
        return [3 + (ord(c) - ord("a")) % 26 for c in text]

    def __len__(self):
        return 64

    def __call__(self, texts, return_tensors=None, padding=False, pad_to_multiple_of=None, add_special_tokens=False):
        if isinstance(texts, str):
            return {"input_ids": self.encode(texts)}
        ids = [self.encode(t) for t in texts]
        width = max(map(len, ids))
        if pad_to_multiple_of:
            width = -(-width // pad_to_multiple_of) * pad_to_multiple_of
        input_ids = torch.tensor([[0] * (width - len(i)) + i for i in ids])
        mask = torch.tensor([[0] * (width - len(i)) + [1] * len(i) for i in ids])

        class Encoding(dict):
            def to(self, device):
                return Encoding({k: v.to(device) for k, v in self.items()})
        return Encoding(input_ids=input_ids, attention_mask=mask)

    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(ord("a") + i - 3) if i >= 3 else "" for i in ids)


# --- the TIS weight and the loss --------------------------------------------

def test_truncated_is_weight_golden():
    # trainer / sampler probabilities 0.5 / 0.2 (ratio 2.5, capped to 2), 0.9 / 0.9 (1), 0.2 / 0.4 (0.5); the 4th
    # token (0.8 / 0.1, ratio 8) is masked: weight 1, not in the stats.
    # gap = (ln 2.5 + 0 + ln 2) / 3; capped: 1 token of 3
    old = torch.log(torch.tensor([[0.5, 0.9, 0.2, 0.8]]))
    smp = torch.log(torch.tensor([[0.2, 0.9, 0.4, 0.1]]))
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    weight, st = sampler.truncated_is_weight(old, smp, mask, cap=2.0)
    assert torch.allclose(weight, torch.tensor([[2.0, 1.0, 0.5, 1.0]]), atol=1e-6)
    assert st["logp_gap"] == pytest.approx((math.log(2.5) + math.log(2.0)) / 3, abs=1e-6)
    assert st["is_capped"] == pytest.approx(1 / 3)
    # cap 0: the correction off (weight 1), the gap still measured; no sampler log-probs: nothing at all
    weight, st = sampler.truncated_is_weight(old, smp, mask, cap=0.0)
    assert weight == 1.0 and st["is_capped"] == 0.0 and st["logp_gap"] > 0.5
    assert sampler.truncated_is_weight(old, None, mask, 2.0) == (1.0, dict(logp_gap=0.0, is_capped=0.0))


def test_grpo_loss_weights_each_token_by_tis():
    # on-policy (ratio 1), one row of 3 tokens, A = 1: per-token loss -A * w with w = 2 (capped from 2.5), 1, 0.5;
    # grpo: mean over the row = -(2 + 1 + 0.5) / 3; the gradient wrt logp is -A * w / 3 per token (w has none)
    logp = torch.log(torch.tensor([[0.5, 0.9, 0.2]])).requires_grad_(True)
    smp = torch.log(torch.tensor([[0.2, 0.9, 0.4]]))
    mask = torch.ones(1, 3)
    loss, st = rl.grpo_loss(logp, logp.detach(), torch.tensor([1.0]), mask, sampler_logp=smp, is_cap=2.0)
    assert loss.item() == pytest.approx(-3.5 / 3, abs=1e-6)
    assert st["is_capped"] == pytest.approx(1 / 3) and st["clip_frac"] == 0.0
    loss.backward()
    assert torch.allclose(logp.grad, torch.tensor([[-2 / 3, -1 / 3, -0.5 / 3]]), atol=1e-6)
    # the k3 KL term is added after the weighting, unweighted (as TRL): ref = logp gives KL 0, so the same loss;
    # without sampler_logp the loss is the plain -A
    loss_kl, _ = rl.grpo_loss(logp, logp.detach(), torch.tensor([1.0]), mask, ref_logp=logp.detach(), beta=0.5,
                              sampler_logp=smp, is_cap=2.0)
    assert loss_kl.item() == pytest.approx(-3.5 / 3, abs=1e-6)
    plain, st = rl.grpo_loss(logp, logp.detach(), torch.tensor([1.0]), mask)
    assert plain.item() == pytest.approx(-1.0) and st["logp_gap"] == 0.0 and st["is_capped"] == 0.0


def _update(rows, adv, cap=2.0):
    """One grpo_update of a fixed tiny model with plain SGD (lr 1, no clipping): (stats, weight change)."""
    rl.loss_type, rl.micro_batch_size, rl.num_iterations, rl.beta = "grpo", 2, 1, 0.0
    rl.max_completion_length, rl.temperature, rl.grad_clip, rl.epsilon, rl.epsilon_high = 4, 1.0, 1e9, 0.2, 0.2
    rl.importance_sampling_cap = cap
    model = _tiny_qwen()
    before = [p.detach().clone() for p in model.parameters()]
    stats, _ = rl.grpo_update(model, None, torch.optim.SGD(model.parameters(), lr=1.0), rows, adv, 0)
    return stats, [p.detach() - b for p, b in zip(model.parameters(), before)]


def test_grpo_update_corrects_with_the_rows_sampler_logp():
    # sampler_logp equal to the trainer's own log-probs: the on-policy update, gap 0; every token's sampler_logp
    # ln 4 above the trainer's (ratio 1/4 everywhere, under the cap): the update is a quarter of it (plain SGD);
    # cap 0 turns the correction off but still logs the gap
    rows = [dict(prompt_ids=[5, 6, 7], completion_ids=[8, 9, 10, 1]), dict(prompt_ids=[11], completion_ids=[12, 1])]
    adv = torch.tensor([1.0, -2.0])
    _, plain = _update(rows, adv)
    with torch.no_grad():
        own = completion_logp(_tiny_qwen(), rows, 0, 1.0)[0]
    same = [dict(r, sampler_logp=own[i, :len(r["completion_ids"])].tolist()) for i, r in enumerate(rows)]
    stats, delta = _update(same, adv)
    assert stats["logp_gap"] < 1e-5 and stats["is_capped"] == 0.0
    assert all(torch.allclose(d, p, atol=1e-6) for d, p in zip(delta, plain))
    shifted = [dict(r, sampler_logp=[v + math.log(4) for v in r["sampler_logp"]]) for r in same]
    stats, delta = _update(shifted, adv)
    assert stats["logp_gap"] == pytest.approx(math.log(4), abs=1e-5)
    assert all(torch.allclose(d, 0.25 * p, atol=1e-6) for d, p in zip(delta, plain))
    stats, delta = _update(shifted, adv, cap=0.0)
    assert stats["logp_gap"] == pytest.approx(math.log(4), abs=1e-5)
    assert all(torch.allclose(d, p, atol=1e-6) for d, p in zip(delta, plain))
    assert rollouts.behaviour_logp(rows, key="sampler_logp") is None


# --- the sampling copy and the engines ----------------------------------------

def test_refresh_copies_weights_in_place():
    model = _tiny_qwen()
    copy = sampler.sampler_copy(model, "static")
    assert sampler.sampler_copy(model, "generate") is None
    assert copy.dtype == torch.float32 and not any(p.requires_grad for p in copy.parameters())  # CPU: float32
    pointers = [p.data_ptr() for p in copy.parameters()]
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.5)
    assert not torch.equal(copy.lm_head.weight, model.lm_head.weight)
    sampler.refresh_sampler(copy, model)
    assert all(torch.equal(a, b) for a, b in zip(copy.parameters(), model.parameters()))
    assert [p.data_ptr() for p in copy.parameters()] == pointers  # no re-allocation
    assert copy.lm_head.weight.data_ptr() == copy.model.embed_tokens.weight.data_ptr()  # still tied
    sampler.refresh_sampler(None, model)  # the "generate" engine: nothing to do
    with pytest.raises(ValueError, match="unknown rollout_engine"):
        sampler.sampler_copy(model, "fast")


def test_gqa_decode_attention_equals_sdpa():
    # one-token queries folded onto the key/value heads give transformers' sdpa result (which repeats the heads), with
    # no mask, a boolean padding mask and an additive one; longer queries go to sdpa itself
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    class Attention(torch.nn.Module):
        num_key_value_groups, is_causal = 4, True
    module = Attention()
    torch.manual_seed(0)
    key, value = torch.randn(2, 2, 7, 16), torch.randn(2, 2, 7, 16)  # (B, Hkv, S, D)
    keep = torch.ones(2, 1, 1, 7, dtype=torch.bool)
    keep[0, ..., :3] = False  # row 0's first three positions are padding
    additive = torch.zeros(2, 1, 1, 7).masked_fill(~keep, float("-inf"))
    for mask in (None, keep, additive):
        query = torch.randn(2, 8, 1, 16)  # (B, H, 1, D)
        ours, _ = sampler.gqa_decode_attention(module, query, key, value, mask, scaling=0.25)
        theirs, _ = sdpa_attention_forward(module, query, key, value, mask, scaling=0.25)
        assert ours.shape == (2, 1, 8, 16) and torch.allclose(ours, theirs, atol=1e-6), (ours - theirs).abs().max()
    query = torch.randn(2, 8, 7, 16)
    causal = torch.ones(7, 7, dtype=torch.bool).tril()[None, None].expand(2, 1, 7, 7)
    assert torch.equal(sampler.gqa_decode_attention(module, query, key, value, causal)[0],
                       sdpa_attention_forward(module, query, key, value, causal)[0])


def test_static_copy_decodes_as_the_policy():
    # the static engine's copy (GQA_DECODE) and the policy (sdpa) give the same greedy tokens and scores through a
    # static cache, with left padding
    from transformers import GenerationConfig
    model = _tiny_qwen().eval()
    copy = sampler.sampler_copy(model, "static")
    assert copy.config._attn_implementation == sampler.GQA_DECODE
    assert sampler.sampler_copy(model, "continuous").config._attn_implementation == "sdpa"
    ids = torch.randint(3, 64, (3, 10))
    mask = torch.ones_like(ids)
    mask[0, :4] = 0
    config = GenerationConfig(do_sample=False, max_new_tokens=12, min_new_tokens=12, cache_implementation="static",
                              pad_token_id=0, output_scores=True, return_dict_in_generate=True)
    ours = copy.generate(input_ids=ids, attention_mask=mask, generation_config=config)
    theirs = model.generate(input_ids=ids, attention_mask=mask, generation_config=config)
    assert torch.equal(ours.sequences, theirs.sequences)
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(ours.scores, theirs.scores))


def test_copy_of_a_sharded_policy_is_whole(tmp_path):
    # FSDP2 (one gloo rank): the policy's parameters are DTensors; the sampling copy is a plain model with the same
    # weights, and a refresh after an update gathers them again
    from torch.distributed.fsdp import fully_shard
    torch.distributed.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    try:
        model = _tiny_qwen()
        weights = {k: v.clone() for k, v in model.state_dict().items()}
        for layer in model.model.layers:
            fully_shard(layer)
        fully_shard(model)
        assert hasattr(next(model.parameters()), "full_tensor")
        copy = sampler.sampler_copy(model, "continuous")
        assert not any(hasattr(p, "full_tensor") for p in copy.parameters())
        assert all(torch.equal(copy.state_dict()[k], v) for k, v in weights.items())
        with torch.no_grad():
            model.lm_head.weight.add_(1.0)  # (tied: the embedding too)
        sampler.refresh_sampler(copy, model)
        assert torch.equal(copy.model.embed_tokens.weight, weights["model.embed_tokens.weight"] + 1.0)
    finally:
        torch.distributed.destroy_process_group()


@pytest.mark.parametrize("engine", ["static", "continuous"])
def test_engine_rows_and_sampler_logp(engine):
    # 2 prompts x 3 answers, lengths forced by stop_at; the rows have generate()'s keys, grouped by prompt, and their
    # sampler_logp is the trainer's log-prob at temperature 0.7 (the float32 copy on the CPU: equal to 1e-4)
    model = _tiny_qwen()
    copy = sampler.sampler_copy(model, engine)
    torch.manual_seed(1)
    stop_at = [2, 9, 5, 12, 1, 7]
    rows = sampler.sample(engine, model, copy, _Tok(), ["abc", "hello"], 3, 12, temperature=0.7, batch_size=4,
                          stop_at=stop_at)
    assert [r["prompt_ids"] for r in rows] == [[3, 4, 5]] * 3 + [[10, 7, 14, 14, 17]] * 3
    forced = [len(r["completion_ids"]) == n for r, n in zip(rows, stop_at)]
    for r, n, at_limit in zip(rows, stop_at, forced):
        assert set(r) == {"prompt_ids", "completion_ids", "text", "truncated", "sampler_logp"}
        assert len(r["sampler_logp"]) == len(r["completion_ids"]) and r["text"] == _Tok().decode(r["completion_ids"])
        assert (r["completion_ids"][-1] == 1) != r["truncated"] and len(r["completion_ids"]) <= n
        # at stop_at: static forces EOS there, continuous cuts the answer (truncated); shorter: a sampled EOS
        assert r["truncated"] == (at_limit and engine == "continuous" and r["completion_ids"][-1] != 1), r
    assert sum(forced) >= 4, forced  # (EOS is 1 token of 64: most answers reach their stop_at)
    logp = completion_logp(model, rows, 0, 0.7)[0].detach()
    for i, r in enumerate(rows):
        n = len(r["completion_ids"]) - (engine == "static" and forced[i])  # a forced EOS: log-prob 0 in the sampler
        assert torch.allclose(torch.tensor(r["sampler_logp"][:n]), logp[i, :n], atol=1e-4), (i, r["sampler_logp"])


def test_sample_rejects_unknown_engine():
    with pytest.raises(ValueError, match="unknown rollout_engine"):
        sampler.sample("fast", None, None, _Tok(), ["a"], 1, 4)


@pytest.mark.gpu
@pytest.mark.parametrize("engine", ["static", "continuous"])
def test_sampler_gpu_bf16_gap(engine):
    """On CUDA the copy is bf16: its log-probs stay close to the float32 trainer's under bf16 autocast (a mean gap of
    a few hundredths of a nat on a random tiny model), and the rows end at EOS or max_new_tokens."""
    model = _tiny_qwen().cuda()
    copy = sampler.sampler_copy(model, engine)
    assert copy.dtype == torch.bfloat16
    rows = sampler.sample(engine, model, copy, _Tok(), ["abc", "hello"], 4, 32, temperature=1.0, batch_size=8)
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        logp, _, mask = completion_logp(model, rows, 0, 1.0)
    smp = rollouts.behaviour_logp(rows, "cuda", "sampler_logp")
    _, st = sampler.truncated_is_weight(logp.float(), smp, mask, 2.0)
    assert st["logp_gap"] < 0.1 and st["is_capped"] < 0.05, st
    assert all(len(r["completion_ids"]) <= 32 and (r["truncated"] or r["completion_ids"][-1] == 1) for r in rows)
