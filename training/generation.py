"""Sampling answers from the policy: transformers' generate, or a colocated vLLM engine (optional)."""
import os
import weakref

from training.models import render_prompt

def generate(model, tok, prompts, num_generations, max_new_tokens, temperature=1.0, top_p=1.0, batch_size=16,
             **generate_kwargs):
    """Sample `num_generations` completions for each prompt with transformers' generate.

    Yields dicts (one per completion, grouped by prompt, in order) with prompt_ids, completion_ids (list of int,
    ending with EOS unless truncated), text and truncated (bool: no EOS within max_new_tokens). generate_kwargs go
    to model.generate (scripts/rl_scale.py forces full-length rollouts with min_new_tokens). The KV cache is always
    on, also when activation checkpointing turned the model's use_cache off for training.
    """
    import torch
    device = next(model.parameters()).device
    tok.padding_side = "left"
    flat = [p for p in prompts for _ in range(num_generations)]
    was_training = model.training
    model.eval()
    for i in range(0, len(flat), batch_size):
        chunk = [render_prompt(tok, p) for p in flat[i:i + batch_size]]
        enc = tok(chunk, return_tensors="pt", padding=True, add_special_tokens=False).to(device)
        with torch.no_grad():
            out = model.generate(**enc, do_sample=temperature > 0, temperature=max(temperature, 1e-5), top_p=top_p,
                                 max_new_tokens=max_new_tokens, pad_token_id=tok.pad_token_id,
                                 eos_token_id=tok.eos_token_id, use_cache=True, **generate_kwargs)
        for row in range(out.shape[0]):
            prompt_ids = enc["input_ids"][row][enc["attention_mask"][row].bool()].tolist()
            comp = out[row, enc["input_ids"].shape[1]:].tolist()
            if tok.eos_token_id in comp:  # keep the EOS itself: it is the token that ends the answer (TRL pad==eos bug)
                comp = comp[:comp.index(tok.eos_token_id) + 1]
                truncated = False
            else:
                truncated = True
            yield dict(prompt_ids=prompt_ids, completion_ids=comp, truncated=truncated,
                       text=tok.decode(comp, skip_special_tokens=True))
    if was_training:
        model.train()


# vLLM rollouts (optional). vLLM is imported lazily, only when asked for, so nothing else needs it installed.
# NOT RUN HERE: vLLM is installed neither on the CPU machine nor on the GPU machine this project was developed on;
# these functions follow vLLM's documented offline API (vllm.LLM, vllm.SamplingParams, RequestOutput, LLM.sleep /
# wake_up) and TRL's GRPOTrainer in vllm_mode="colocate": the engine lives in the training process on the same GPU,
# sleeps (level 1: weights to CPU memory, KV cache freed) while the policy trains and bench.py times kernels, wakes
# before the weight push, and returns each sampled token's log-prob under the distribution it was drawn from
# (logprobs_mode="processed_logprobs": temperature and top_p applied), which the trainer's log-probs are compared with.

ASLEEP = weakref.WeakSet()  # the engines vllm_sleep put to sleep and no wake_up has woken since


def vllm_available():
    """True when the `vllm` package can be imported (without importing it: that costs seconds and GPU memory)."""
    import importlib.util
    return importlib.util.find_spec("vllm") is not None


def load_vllm(model_path, gpu_memory_utilization=0.3, seed=0, dtype="bfloat16", max_model_len=None,
              max_num_batched_tokens=4096, sleep_mode=False):
    """A vllm.LLM colocated with the training model in this process (not run here: see above).

    gpu_memory_utilization: fraction of the GPU's memory vLLM may take (weights + KV cache); the training model,
    its gradients and optimizer need the rest. seed: vLLM's sampling seed (give each DDP rank its own).
    max_num_batched_tokens: tokens per engine step (prefill chunks and decodes); 4096 as TRL's colocate mode, whose
    comment says vLLM's memory profiler misjudges the free memory at its much larger default. sleep_mode: build the
    engine so that vllm_sleep can free its GPU memory between rollouts (vLLM's enable_sleep_mode).
    Under torchrun each rank holds its own engine on its own GPU (distributed_executor_backend="external_launcher",
    as TRL's colocate mode does), so no extra processes are spawned. The engine runs in this process
    (VLLM_ENABLE_V1_MULTIPROCESSING=0) so that vllm_push_weights can reach the model object.
    Raises RuntimeError when vLLM is not installed.
    """
    if not vllm_available():
        raise RuntimeError("--use_vllm=True but vllm is not installed (pip install vllm); or use --use_vllm=False")
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    from vllm import LLM
    kw = dict(model=model_path, gpu_memory_utilization=gpu_memory_utilization, seed=seed, dtype=dtype,
              enable_prefix_caching=True, max_num_batched_tokens=max_num_batched_tokens,
              logprobs_mode="processed_logprobs", enable_sleep_mode=sleep_mode)
    if max_model_len:
        kw["max_model_len"] = max_model_len
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        kw["distributed_executor_backend"] = "external_launcher"
    return LLM(**kw)


def vllm_sleep(llm):
    """Free the engine's GPU memory until the next vllm_wake: level 1 moves its weights to CPU memory and drops its
    KV cache (TRL calls it after generating), so training and bench.py's kernel timing get the GPU to themselves.
    Needs an engine made with load_vllm(sleep_mode=True)."""
    llm.sleep(level=1)
    ASLEEP.add(llm)


def vllm_wake(llm):
    """Bring a sleeping engine back (weights to the GPU, a fresh KV cache); nothing for one that is awake."""
    if llm in ASLEEP:
        llm.wake_up()
        ASLEEP.discard(llm)


def vllm_generate(llm, tok, prompts, num_generations, max_new_tokens, temperature=1.0, top_p=1.0):
    """Sample like `generate`, with a vllm.LLM (not run here: see above), waking it first if it sleeps. Returns a list
    of dicts in the same order and with the same keys as `generate`: prompt_ids, completion_ids (ending with EOS
    unless truncated), text, truncated (vLLM's finish_reason == "length"), and sampler_logp: one float per completion
    token, its log-prob as vLLM sampled it (SamplingParams(logprobs=0) returns the sampled token's alone; an EOS
    appended here, not sampled by vLLM, gets 0.0). Prompts go through the chat template as in `generate`."""
    from vllm import SamplingParams
    vllm_wake(llm)
    params = SamplingParams(n=num_generations, temperature=temperature, top_p=top_p, max_tokens=max_new_tokens,
                            logprobs=0)
    outs = llm.generate([render_prompt(tok, p) for p in prompts], params, use_tqdm=False)
    rows = []
    for out in outs:  # one RequestOutput per prompt, in prompt order; .outputs holds its n completions
        for c in out.outputs:
            comp = list(c.token_ids)
            # c.logprobs: per sampled token, {token id: Logprob} holding that token (and the top `logprobs` others)
            sampler_logp = [float(step[token].logprob) for token, step in zip(comp, c.logprobs)]
            assert len(sampler_logp) == len(comp), f"vLLM gave {len(sampler_logp)} log-probs for {len(comp)} tokens"
            truncated = c.finish_reason == "length"
            if not truncated and (not comp or comp[-1] != tok.eos_token_id) and c.stop_reason is None:
                comp.append(tok.eos_token_id)  # stopped on EOS but vLLM left it out: the loss must see the end
                sampler_logp.append(0.0)
            rows.append(dict(prompt_ids=list(out.prompt_token_ids), completion_ids=comp, truncated=truncated,
                             text=tok.decode(comp, skip_special_tokens=True), sampler_logp=sampler_logp))
    return rows


def vllm_push_weights(llm, model):
    """Copy the training model's current weights into the colocated vLLM engine (woken first: TRL wakes it before the
    push, so the pushed weights land in GPU memory and no sleeping copy overwrites them) and drop its prefix cache (KV
    blocks computed with the old weights would otherwise be reused: a stale-cache bug TRL users hit, REFERENCE.md
    §5). Not run here: see above. The path through llm_engine...model_runner.model.load_weights is the one TRL's
    colocate mode uses; vLLM's own load_weights maps Hugging Face parameter names onto its fused layers."""
    vllm_wake(llm)
    state = model.state_dict()
    try:
        runner_model = llm.llm_engine.model_executor.driver_worker.model_runner.model
        runner_model.load_weights(state.items())
    except AttributeError:  # engines where the worker is reached through collective_rpc only
        llm.collective_rpc(lambda worker: worker.model_runner.model.load_weights(state.items()))
    llm.reset_prefix_cache()
