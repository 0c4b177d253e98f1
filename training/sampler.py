"""Fast rollouts without vLLM: a copy of the policy that only samples, and the truncated importance-sampling (TIS)
correction for the gap between the sampler's and the trainer's log-probs.

rollout_engine picks how rl.py samples:
 - "generate": transformers generate on the training weights themselves (float32, DynamicCache); no copy, rows carry
   no sampler_logp and the loss needs no correction;
 - "static": generate on the sampling copy (bf16 on CUDA) with a static KV cache, whose fixed shapes let transformers
   compile the decode step (torch.compile, mode reduce-overhead: CUDA graphs); prompts are padded to a multiple of
   PROMPT_PAD tokens so successive calls reuse the compiled graphs instead of recompiling;
 - "continuous": transformers' continuous batching (generate_batch's manager) on the sampling copy: a paged KV cache,
   finished answers leave the batch and the rest go on, so a short answer costs only its own tokens.
The copy is refreshed after every optimizer update by copying the weights in place (refresh_sampler): the contract of
a vLLM weight push. It samples in bf16 and the trainer scores in float32 under autocast, so the two disagree a little
on every token; both new engines record sampler_logp, the sampled token's log-prob under the distribution it was drawn
from (temperature and top_p applied), and grpo_loss weights each token's loss by min(exp(old_logp - sampler_logp),
cap) (truncated_is_weight; TRL's vllm_importance_sampling_correction, token_truncate mode). Both new engines sample
with the temperature and top_p given and nothing else (top_k off, no repetition penalty, whatever the model's
generation_config says), the distribution whose log-probs the loss takes.
The static engine's copy attends with GQA_DECODE: transformers' sdpa, except that a one-token query attends to the
grouped key and value heads as they are. Under torch.compile transformers' sdpa repeats each key/value head for every
query head it serves (repeat_kv), so a decode step over a static cache of S tokens reads and writes groups x the cache
(6x for Qwen2.5-1.5B), which grows with S.
"""
import copy
import inspect

import torch

from training.generation import generate
from training.models import render_prompt

ENGINES = ("auto", "generate", "static", "continuous")
PROMPT_PAD = 256  # static engine: prompts left-padded to a multiple of this many tokens (fewer compiled shapes)
GQA_DECODE = "sdpa_gqa_decode"  # the sampling copy's attention (module docstring)


def gqa_decode_attention(module, query, key, value, attention_mask, scaling=None, **kwargs):
    """Attention for the sampling copy, registered as GQA_DECODE. query (B, H, Q, D); key, value (B, Hkv, S, D);
    attention_mask None or (B, 1, Q, S), bool or additive. Returns ((B, Q, H, D), None) as transformers' attention
    functions do. A one-token query (decoding) is folded into (B, Hkv, H // Hkv, D): the query heads that share a
    key/value head become the rows of one attention over it, so no head is repeated; anything else goes to
    transformers' sdpa_attention_forward."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    groups = getattr(module, "num_key_value_groups", 1)
    batch, heads, q_len, dim = query.shape
    if q_len != 1 or groups == 1 or kwargs.get("position_bias") is not None or (
            attention_mask is not None and attention_mask.shape[1] != 1):
        return sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling, **kwargs)
    folded = query.reshape(batch, heads // groups, groups, dim)  # (B, Hkv, groups, D)
    out = torch.nn.functional.scaled_dot_product_attention(folded, key, value, attn_mask=attention_mask, scale=scaling)
    return out.reshape(batch, heads, 1, dim).transpose(1, 2).contiguous(), None  # (B, 1, H, D)


def _register_attention():
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import sdpa_mask
    AttentionInterface.register(GQA_DECODE, gqa_decode_attention)
    AttentionMaskInterface.register(GQA_DECODE, sdpa_mask)  # the same masks as sdpa


def pick_engine(engine, device):
    """The engine "auto" stands for: "static" on CUDA, the fastest there (scripts/rl_scale.py's table in
    docs/TRAINING.md), "generate" on the CPU, where transformers compiles nothing and a copy only costs memory. Any
    other engine is returned as given."""
    return ("static" if str(device).startswith("cuda") else "generate") if engine == "auto" else engine


def sampler_copy(model, engine, dtype="bfloat16"):
    """The sampling copy of `model` for `engine`: None for "generate" (it samples from the training weights), else a
    whole (unsharded) copy in `dtype` on CUDA (float32 on the CPU), in eval mode, without gradients, with its KV cache
    on; under FSDP every rank holds one. Memory: 2 bytes per parameter in bf16. Raises ValueError for an unknown
    engine."""
    param = next(model.parameters())
    engine = pick_engine(engine, param.device.type)
    if engine not in ENGINES:
        raise ValueError(f"unknown rollout_engine {engine!r}: {' | '.join(ENGINES)}")
    if engine == "generate":
        return None
    cuda = param.device.type == "cuda"
    target = getattr(torch, dtype) if cuda else torch.float32
    if hasattr(param, "full_tensor"):  # sharded (FSDP2): a whole model of the same config, filled by a refresh
        from transformers import AutoModelForCausalLM
        with torch.device(torch.device("cuda", torch.cuda.current_device()) if cuda else "cpu"):
            sampler = AutoModelForCausalLM.from_config(model.config, dtype=target)
        refresh_sampler(sampler, model)
    else:
        sampler = copy.deepcopy(model).to(target)
    sampler.config.use_cache = True  # the training copy may have turned it off for activation checkpointing
    if engine == "static" and getattr(sampler.config, "_attn_implementation", None) == "sdpa":
        _register_attention()
        sampler.set_attn_implementation(GQA_DECODE)
    return sampler.eval().requires_grad_(False)


@torch.no_grad()
def refresh_sampler(sampler, model):
    """Copy `model`'s current weights into `sampler` in place (cast to its dtype; no new memory, so compiled graphs
    and CUDA graphs that point at the weights stay valid). A sharded (DTensor) parameter is gathered first. No-op
    for sampler None."""
    if sampler is None:
        return
    for (name, dst), src in zip(sampler.named_parameters(), model.parameters()):
        src = src.full_tensor() if hasattr(src, "full_tensor") else src
        assert dst.shape == src.shape, f"sampler parameter {name}: {tuple(dst.shape)} != {tuple(src.shape)}"
        dst.copy_(src)


def truncated_is_weight(old_logp, sampler_logp, mask, cap):
    """TIS weight per token: min(exp(old_logp - sampler_logp), cap), without gradient. old_logp: the trainer's
    log-probs of the sampled tokens under the weights that sampled them; sampler_logp: the sampler's; mask: all three
    (B, T). Returns (weight (B, T), {logp_gap: mean |old_logp - sampler_logp| over the mask, is_capped: fraction of
    masked tokens whose ratio exceeded cap}). sampler_logp None (the trainer's own weights sampled) or cap 0 (the
    correction off): weight 1.0 and zero stats; the gap is still measured when only the cap is 0."""
    if sampler_logp is None:
        return 1.0, dict(logp_gap=0.0, is_capped=0.0)
    diff = (old_logp - sampler_logp).detach() * mask
    ratio = torch.exp(diff)
    n = mask.sum().clamp(min=1.0)
    if cap <= 0:
        return 1.0, dict(logp_gap=(diff.abs().sum() / n).item(), is_capped=0.0)
    stats = dict(logp_gap=(diff.abs().sum() / n).item(), is_capped=(((ratio > cap).float() * mask).sum() / n).item())
    return ratio.clamp(max=cap), stats


class _LogpRecorder:
    """Last logits processor of the static engine: it sees the scores the next token is drawn from and stores their
    log-softmax; the next call reads the drawn token (the last of input_ids) and keeps its log-prob. The final
    token's log-prob is read by `finish`. One (B, V) float32 tensor is held, never the whole (B, T, V)."""

    def __init__(self):
        self.prev, self.logp = None, []

    def __call__(self, input_ids, scores):
        if self.prev is not None:
            self.logp.append(self.prev.gather(1, input_ids[:, -1:]))  # (B, 1)
        self.prev = torch.log_softmax(scores.float(), dim=-1)  # (B, V)
        return scores

    def finish(self, last_tokens):
        """All recorded log-probs, (B, steps), once generation is over; last_tokens: (B,) the final step's tokens."""
        if self.prev is not None:
            self.logp.append(self.prev.gather(1, last_tokens[:, None]))
        return torch.cat(self.logp, dim=1)


class _StopAt:
    """Benchmark logits processor: forces EOS as the stop_at[row]-th new token of each row (scripts/rl_scale.py's
    spread of answer lengths on random-weight models that would otherwise never stop)."""

    def __init__(self, stop_at, prompt_len, eos_id):
        self.stop_at, self.prompt_len, self.eos_id = stop_at, prompt_len, eos_id

    def __call__(self, input_ids, scores):
        # no host sync and no copy per step: stop_at moves to the device once, the EOS column is set by where()
        self.stop_at = self.stop_at.to(scores.device, non_blocking=True)
        done = input_ids.shape[1] - self.prompt_len + 1 >= self.stop_at  # (B,)
        scores = scores.masked_fill(done[:, None], float("-inf"))
        scores[:, self.eos_id] = torch.where(done, 0.0, scores[:, self.eos_id])
        return scores


def _row(tok, prompt_ids, comp, logp, max_new_tokens):
    """A row as generate() yields it, with sampler_logp: completion cut after its EOS."""
    if tok.eos_token_id in comp:
        end = comp.index(tok.eos_token_id) + 1
        comp, logp, truncated = comp[:end], logp[:end], False
    else:
        truncated = True
    assert len(logp) == len(comp), f"{len(logp)} log-probs for {len(comp)} tokens"
    return dict(prompt_ids=prompt_ids, completion_ids=comp, truncated=truncated, sampler_logp=logp,
                text=tok.decode(comp, skip_special_tokens=True))


def _gen_settings(tok, temperature, top_p, max_new_tokens):
    return dict(do_sample=temperature > 0, temperature=max(temperature, 1e-5), top_p=top_p, top_k=0,
                repetition_penalty=1.0, max_new_tokens=max_new_tokens, pad_token_id=tok.pad_token_id,
                eos_token_id=tok.eos_token_id)


def _static(sampler, tok, flat, max_new_tokens, temperature, top_p, batch_size, stop_at):
    from transformers import GenerationConfig, LogitsProcessorList, TemperatureLogitsWarper, TopPLogitsWarper
    device = next(sampler.parameters()).device
    tok.padding_side = "left"
    rows = []
    for i in range(0, len(flat), batch_size):
        enc = tok([render_prompt(tok, p) for p in flat[i:i + batch_size]], return_tensors="pt", padding=True,
                  pad_to_multiple_of=PROMPT_PAD, add_special_tokens=False).to(device)
        prompt_len = enc["input_ids"].shape[1]
        recorder = _LogpRecorder()
        processors = [] if stop_at is None else [_StopAt(torch.tensor(stop_at[i:i + batch_size]), prompt_len,
                                                         tok.eos_token_id)]
        if temperature > 0:  # the warpers run here, before the recorder, so it sees the distribution sampled from
            processors.append(TemperatureLogitsWarper(temperature))
            if top_p < 1.0:
                processors.append(TopPLogitsWarper(top_p))
        config = GenerationConfig(**dict(_gen_settings(tok, 1.0, 1.0, max_new_tokens), do_sample=temperature > 0),
                                  cache_implementation="static", use_cache=True)
        out = sampler.generate(**enc, generation_config=config,
                               logits_processor=LogitsProcessorList(processors + [recorder]))  # (b, P + steps)
        logp = recorder.finish(out[:, -1]).cpu()  # (b, steps)
        for row in range(out.shape[0]):
            prompt_ids = enc["input_ids"][row][enc["attention_mask"][row].bool()].tolist()
            rows.append(_row(tok, prompt_ids, out[row, prompt_len:].tolist(), logp[row].tolist(), max_new_tokens))
    return rows


def _continuous(sampler, tok, flat, max_new_tokens, temperature, top_p, stop_at):
    from transformers import ContinuousBatchingConfig, GenerationConfig
    from transformers.generation.continuous_batching.utils import WorkloadHints
    ids = [tok(render_prompt(tok, p), add_special_tokens=False)["input_ids"] for p in flat]
    config = GenerationConfig(**_gen_settings(tok, temperature, top_p, max_new_tokens))
    seed = int(torch.randint(2 ** 31 - 1, ()).item())  # from torch's generator: rl.py's seeding makes runs repeat
    hints = WorkloadHints(max_prompt_length=max(map(len, ids)), max_generated_length=max_new_tokens,
                          num_requests=len(ids))
    # a KV cache for the whole workload at once, sized by it: left to itself the manager takes 90% of the free memory
    page_size = 256
    num_blocks = sum(-(-(len(i) + max_new_tokens) // page_size) for i in ids) + 1
    size_key = "page_size" if "page_size" in inspect.signature(ContinuousBatchingConfig).parameters else "block_size"
    cb_config = ContinuousBatchingConfig(return_logprobs=True, seed=seed, num_blocks=num_blocks,
                                         **{size_key: page_size})  # transformers 5.17 calls it block_size
    results = {}
    with sampler.continuous_batching_context_manager(generation_config=config, continuous_batching_config=cb_config,
                                                     workload_hints=hints, block=True, timeout=5) as manager:
        for i, prompt_ids in enumerate(ids):
            manager.add_request(prompt_ids, request_id=f"row{i}",
                                max_new_tokens=max_new_tokens if stop_at is None else int(stop_at[i]))
        while len(results) < len(ids):
            result = manager.get_result(timeout=1)
            if result is not None and result.is_finished():
                results[result.request_id] = result
            elif result is None and not manager.is_running():
                raise RuntimeError(f"continuous batching stopped with {len(results)} of {len(ids)} answers")
    rows = []
    for i, prompt_ids in enumerate(ids):
        res = results[f"row{i}"]
        if res.error:
            raise RuntimeError(f"continuous batching failed on answer {i}: {res.error}")
        rows.append(_row(tok, prompt_ids, list(res.generated_tokens), list(res.logprobs), max_new_tokens))
    return rows


@torch.no_grad()
def sample(engine, model, sampler, tok, prompts, num_generations, max_new_tokens, temperature=1.0, top_p=1.0,
           batch_size=32, stop_at=None, synced_gpus=False):
    """num_generations completions of each prompt by `engine` (module docstring): a list of dicts grouped by prompt,
    in order, with prompt_ids, completion_ids (ending with EOS unless truncated), text, truncated, and for "static"
    and "continuous" sampler_logp (one float per completion token). model: the training policy ("generate" samples
    from it); sampler: sampler_copy's copy. batch_size: completions per generate call ("continuous" takes all at
    once). stop_at: benchmarks only, a token count per completion where it ends (forced EOS; "continuous" cuts it
    there instead). synced_gpus: "generate" on a policy sharded over several ranks (FSDP: every rank must take every
    decode step). Raises ValueError for an unknown engine, RuntimeError when continuous batching fails."""
    flat = [p for p in prompts for _ in range(num_generations)]
    if engine == "auto":
        engine = pick_engine(engine, next(model.parameters()).device.type)
    if engine == "generate":
        assert stop_at is None, "stop_at is for the static and continuous engines"
        return list(generate(model, tok, prompts, num_generations, max_new_tokens, temperature, top_p, batch_size,
                             synced_gpus=synced_gpus))
    if engine not in ENGINES:
        raise ValueError(f"unknown rollout_engine {engine!r}: {' | '.join(ENGINES)}")
    assert sampler is not None, f"rollout_engine={engine} samples from sampler_copy's copy: pass it"
    if engine == "static":
        return _static(sampler, tok, flat, max_new_tokens, temperature, top_p, batch_size, stop_at)
    return _continuous(sampler, tok, flat, max_new_tokens, temperature, top_p, stop_at)
