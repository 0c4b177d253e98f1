"""Loading a policy (a Hugging Face name or a folder sft.py / rl.py saved) with errors that name the cause, the
per-token log-probs of completions that GRPO's loss needs (memory-lean), and the (prompt, response) encoding of SFT."""
import os

def quiet_transformers():
    """Silence transformers' own progress bars ("Loading weights", and "Writing model shards" at every checkpoint:
    our log lines already say what was loaded or saved) with its documented switch; huggingface_hub's download bars
    stay on unless they were off (a first download of a real model takes minutes and should show its progress)."""
    import huggingface_hub.utils as hub
    from transformers.utils import logging as hf_logging
    hub_on = not hub.are_progress_bars_disabled()
    hf_logging.disable_progress_bar()  # turns both off ...
    if hub_on:
        hub.enable_progress_bars()  # ... so the hub's go back on


def hub_unreachable(timeout_s=3.0):
    """"" when a TCP connection to the Hugging Face endpoint ($HF_ENDPOINT, default https://huggingface.co) opens
    within timeout_s seconds, else why not (one line). Behind a proxy ($HTTPS_PROXY) nothing is probed: ""."""
    import socket
    import urllib.parse
    if os.environ.get("HTTPS_PROXY") or os.environ.get("https_proxy"):
        return ""
    url = urllib.parse.urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    host, port = url.hostname or "huggingface.co", url.port or (80 if url.scheme == "http" else 443)
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
        return ""
    except OSError as e:
        return f"{host}:{port} cannot be reached: {getattr(e, 'strerror', None) or e}"


def resolve_model(name, paths_only=False):
    """Where load_model finds `name`: (path or Hugging Face name, local_files_only). Checked before transformers is
    asked, so that a mistake costs a second and one line instead of a minute of retries and a traceback: an
    existing folder must hold a model (config.json); a name that looks like a path (starts with / . ~, has more
    than one "/", or its first part is an existing folder, like out/sftt) but does not exist is a mistyped folder,
    and the closest names beside it are suggested; anything else is a Hugging Face name, loaded from the local cache
    without the network when $HF_HUB_OFFLINE is set or the Hub cannot be reached (hub_unreachable), an error when
    it is not cached then. Raises RuntimeError: one line, the cause and the fix."""
    import difflib
    path = os.path.expanduser(name)
    if os.path.isdir(path):
        if not os.path.exists(os.path.join(path, "config.json")):
            raise RuntimeError(f"model folder {name!r} holds no model (no config.json); give a folder that sft.py or "
                               "rl.py saved (out/sft, out/rl/ckpt) or a Hugging Face name")
        return path, True
    parts = name.strip("/").split("/")
    if name.startswith(("/", ".", "~")) or name.endswith("/") or len(parts) > 2 or \
            os.path.isdir(parts[0]) and len(parts) == 2:   # a path (no hub name ends in /): no hub advice
        parent = os.path.dirname(os.path.normpath(path)) or "."
        if os.path.isdir(parent):
            near = difflib.get_close_matches(os.path.basename(os.path.normpath(path)), sorted(os.listdir(parent)),
                                             3, 0.6)
            shown = sorted(n for n in os.listdir(parent) if not n.startswith("."))[:8]
            hint = ("did you mean " + " or ".join(repr(os.path.join(os.path.dirname(os.path.normpath(name)), m))
                                                  for m in near) + "?" if near else
                    f"{parent} holds: {', '.join(shown) or 'nothing'}")
        else:
            hint = f"its folder {parent} does not exist either"
        raise RuntimeError(f"model folder {name!r} does not exist; {hint}")
    if paths_only:  # (evaluate.py's check before it writes anything: the Hub is asked only when a model is loaded)
        return name, False
    cached = False
    try:
        from huggingface_hub import try_to_load_from_cache
        cached = isinstance(try_to_load_from_cache(name, "config.json"), str)
    except Exception:  # not a valid repo id: transformers says so below
        pass
    offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")
    why = "HF_HUB_OFFLINE is set" if offline else hub_unreachable()
    if why and not cached:
        raise RuntimeError(f"model {name!r} is neither a local folder nor in the Hugging Face cache, and cannot be "
                           f"downloaded ({why}); download it where there is network (hf download {name}) or give "
                           "a local folder")
    return name, bool(why)


def load_model(name_or_path, device="cpu", dtype="float32"):
    """(model, tokenizer) from a Hugging Face name or a local folder (what sft.py and rl.py save).

    Raises RuntimeError with one line, the model name and the cause when it cannot be loaded (resolve_model: a
    missing or mistyped folder, no network; else the first line of transformers' error: an unknown name on the
    Hub, an unknown architecture), instead of a long transformers traceback.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    source, local_only = resolve_model(name_or_path)
    quiet_transformers()
    try:
        tok = AutoTokenizer.from_pretrained(source, local_files_only=local_only)
        model = AutoModelForCausalLM.from_pretrained(source, dtype=getattr(torch, dtype), local_files_only=local_only)
    except Exception as e:  # OSError, ValueError, HTTP errors... all mean the same thing to the user
        first = (str(e).strip().splitlines() or [""])[0]
        raise RuntimeError(f"cannot load model {name_or_path!r}: {type(e).__name__}: {first}") from e
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return model.to(device), tok


def enable_checkpointing(model):
    """Non-reentrant activation checkpointing (works under DDP), through the API this transformers version has
    (activation_checkpointing_enable in recent 5.x, where gradient_checkpointing_enable is a deprecated alias).
    Active in train mode only; generate() (eval mode, use_cache=True) is unaffected."""
    model.config.use_cache = False
    if hasattr(model, "activation_checkpointing_enable"):
        model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})


def _head_logp(h, lm_head, targets, temp):
    """Log-prob of each target token and the entropy of each position's distribution, from the last hidden states.
    h: (B, c, H); targets: (B, c). Returns logp (B, c), entropy (B, c) (no gradient). log p = logit - logsumexp, so
    only this chunk's (B, c, V) fp32 logits ever exist."""
    import torch
    logits = lm_head(h).float() / temp  # (B, c, V)
    lse = torch.logsumexp(logits, dim=-1)  # (B, c)
    logp = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - lse
    with torch.no_grad():
        ent = lse - (torch.softmax(logits, dim=-1) * logits).sum(-1)  # -sum p log p
    return logp, ent


def pad_rows(rows, pad_id, device="cpu"):
    """rows' prompts and completions in one batch: each prompt left-padded to P (the longest prompt), its completion
    after it, then padding to P + C (C: the longest completion). Returns (input ids (B, P + C) long, attention
    mask (B, P + C) long, P), on `device`."""
    import torch
    P = max(len(r["prompt_ids"]) for r in rows)
    C = max(len(r["completion_ids"]) for r in rows)
    ids = torch.full((len(rows), P + C), pad_id, dtype=torch.long)
    att = torch.zeros_like(ids)
    for i, r in enumerate(rows):
        prompt, completion = r["prompt_ids"], r["completion_ids"]
        ids[i, P - len(prompt):P + len(completion)] = torch.tensor(prompt + completion)
        att[i, P - len(prompt):P + len(completion)] = 1
    return ids.to(device), att.to(device), P


def completion_logp(model, rows, pad_id, temp, chunk_size=512):
    """Per-token log-probs (and entropies) of completions under `model`. rows: dicts with prompt_ids and
    completion_ids (lists). Returns logp, entropy, mask, each (B, C) with C = longest completion; prompts are
    left-padded and position ids follow the attention mask, as in generate().

    Memory: the decoder runs once; the LM head, logsumexp and the chosen token's logit then go over the
    completion in chunks of chunk_size tokens (rl.py's logp_chunk_size; 0 = one chunk), and with gradients each
    chunk is checkpointed (its logits are recomputed in backward), so no full-vocabulary fp32 tensor is ever held:
    B x chunk_size x V floats at a time instead of B x C x V (2.5 GB per 4k-token row at Qwen's 152k vocabulary,
    several times over with the log-softmax and entropy). Equal to the full log-softmax within 1e-5, gradients too
    (tests/test_rl.py). Needs a plain output-embedding head (Llama, Qwen2...):
    a model with a final logit softcap is refused with ValueError."""
    import torch
    import torch.utils.checkpoint
    if getattr(model.config, "final_logit_softcapping", None):
        raise ValueError("completion_logp: models with final_logit_softcapping are not supported")
    ids, att, P = pad_rows(rows, pad_id, next(model.parameters()).device)  # (B, P + C) each
    C = ids.shape[1] - P
    pos = (att.cumsum(-1) - 1).clamp(min=0)
    decoder = getattr(model, "decoder_forward", None) or model.get_decoder()  # the former under FSDP (sharding.py)
    h = decoder(input_ids=ids, attention_mask=att, position_ids=pos).last_hidden_state[:, P - 1:P + C - 1]
    head, targets, step = model.get_output_embeddings(), ids[:, P:], chunk_size or C  # h: (B, C, H)
    parts = []
    for j in range(0, C, step):
        args = (h[:, j:j + step], head, targets[:, j:j + step], temp)
        if torch.is_grad_enabled() and h.requires_grad:
            parts.append(torch.utils.checkpoint.checkpoint(_head_logp, *args, use_reentrant=False))
        else:
            parts.append(_head_logp(*args))
    logp, ent = (torch.cat(x, dim=1) for x in zip(*parts))
    return logp, ent, att[:, P:].float()


def render_prompt(tok, prompt):
    """Prompt text as the model should see it: through the chat template when the tokenizer has one."""
    if getattr(tok, "chat_template", None):
        return tok.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                       add_generation_prompt=True)
    return prompt


def encode_example(tok, prompt, response, max_len):
    """Token ids and loss mask for one (prompt, response) pair: loss on the response tokens and the final EOS only.

    Returns (ids, mask) as lists of ints of equal length <= max_len; the prompt is cut from the left if needed,
    never the response (a response longer than max_len raises ValueError).
    """
    p = tok(render_prompt(tok, prompt), add_special_tokens=False)["input_ids"]
    r = tok(response, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    if len(r) > max_len:
        raise ValueError(f"response of {len(r)} tokens is longer than max_len={max_len}")
    p = p[max(0, len(p) + len(r) - max_len):]
    return p + r, [0] * len(p) + [1] * len(r)

