"""Sampling answers from the policy: transformers' generate, or a colocated vLLM engine (optional)."""
import os

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
# these functions follow vLLM's documented offline API (vllm.LLM, vllm.SamplingParams, RequestOutput) and the way
# TRL's GRPOTrainer (vllm_mode="colocate") pushes weights into a colocated engine.

def vllm_available():
    """True when the `vllm` package can be imported (without importing it: that costs seconds and GPU memory)."""
    import importlib.util
    return importlib.util.find_spec("vllm") is not None


def load_vllm(model_path, gpu_memory_utilization=0.3, seed=0, dtype="bfloat16", max_model_len=None):
    """A vllm.LLM colocated with the training model in this process (not run here: see above).

    gpu_memory_utilization: fraction of the GPU's memory vLLM may take (weights + KV cache); the training model,
    its gradients and optimizer need the rest. seed: vLLM's sampling seed (give each DDP rank its own).
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
              enable_prefix_caching=True)
    if max_model_len:
        kw["max_model_len"] = max_model_len
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        kw["distributed_executor_backend"] = "external_launcher"
    return LLM(**kw)


def vllm_generate(llm, tok, prompts, num_generations, max_new_tokens, temperature=1.0, top_p=1.0):
    """Sample like `generate`, with a vllm.LLM (not run here: see above). Returns a list of dicts in the same order
    and with the same keys as `generate`: prompt_ids, completion_ids (ending with EOS unless truncated), text,
    truncated (vLLM's finish_reason == "length"). Prompts go through the chat template as in `generate`."""
    from vllm import SamplingParams
    params = SamplingParams(n=num_generations, temperature=temperature, top_p=top_p, max_tokens=max_new_tokens)
    outs = llm.generate([render_prompt(tok, p) for p in prompts], params, use_tqdm=False)
    rows = []
    for out in outs:  # one RequestOutput per prompt, in prompt order; .outputs holds its n completions
        for c in out.outputs:
            comp = list(c.token_ids)
            truncated = c.finish_reason == "length"
            if not truncated and (not comp or comp[-1] != tok.eos_token_id) and c.stop_reason is None:
                comp.append(tok.eos_token_id)  # stopped on EOS but vLLM left it out: the loss must see the end
            rows.append(dict(prompt_ids=list(out.prompt_token_ids), completion_ids=comp, truncated=truncated,
                             text=tok.decode(comp, skip_special_tokens=True)))
    return rows


def vllm_push_weights(llm, model):
    """Copy the training model's current weights into the colocated vLLM engine and drop its prefix cache (KV
    blocks computed with the old weights would otherwise be reused: a stale-cache bug TRL users hit, REFERENCE.md
    §5). Not run here: see above. The path through llm_engine...model_runner.model.load_weights is the one TRL's
    colocate mode uses; vLLM's own load_weights maps Hugging Face parameter names onto its fused layers."""
    state = model.state_dict()
    try:
        runner_model = llm.llm_engine.model_executor.driver_worker.model_runner.model
        runner_model.load_weights(state.items())
    except AttributeError:  # engines where the worker is reached through collective_rpc only
        llm.collective_rpc(lambda worker: worker.model_runner.model.load_weights(state.items()))
    llm.reset_prefix_cache()

