"""
What the stages share besides the prompts (prompting.py): configuration and --help, JSON lines, model loading and
generation, vLLM, running a chained stage; the DDP helpers live in ddp_helpers.py and are re-exported here.
"""
import ast
import difflib
import json
import os
import re
import sys
import textwrap

from training.ddp import (ddp_all_reduce_grads, ddp_barrier, ddp_cleanup, ddp_gather, ddp_setup,  # noqa: F401
                         param_checksum, visible_gpu)  # DDP helpers (ddp_helpers.py), used as common.<name>

ROOT = os.path.dirname(os.path.abspath(__file__))

# -----------------------------------------------------------------------------
# Configuration, nanoGPT style: each stage script declares its settings as module-level globals, then calls
# configure(globals()). Command-line forms accepted (later ones win):
#   --preset=tiny      exec config/tiny.py into the globals (a preset is plain Python assignments)
#   --gpu=a100         apply GPU_PRESETS['a100'] (nvcc arch, the GPU name in the prompt, batch sizes)
#   --key=value / --key value   override one global; the value is parsed as a Python literal when it parses,
#                               and must have the type of the default (ints are accepted for floats).

GPU_PRESETS = {
    # arch: TORCH_CUDA_ARCH_LIST value for nvcc; gpu_name: what the prompt tells the model it is optimising for.
    # The batch sizes are for the default 1.5B policy (float32 weights and AdamW, bf16 autocast) on one card of
    # that GPU; scale them with --key=value for other models.
    "a100": dict(device="cuda", arch="8.0", gpu_name="NVIDIA A100", num_prompts=4, num_generations=8, micro_batch_size=1),
    "h100": dict(device="cuda", arch="9.0", gpu_name="NVIDIA H100", num_prompts=4, num_generations=8, micro_batch_size=1),
    "h200": dict(device="cuda", arch="9.0", gpu_name="NVIDIA H200", num_prompts=8, num_generations=8, micro_batch_size=2),
    "h20": dict(device="cuda", arch="9.0", gpu_name="NVIDIA H20", num_prompts=4, num_generations=8, micro_batch_size=1),
    "l40": dict(device="cuda", arch="8.9", gpu_name="NVIDIA L40", num_prompts=2, num_generations=8, micro_batch_size=1),
    "rtx3090": dict(device="cuda", arch="8.6", gpu_name="NVIDIA GeForce RTX 3090", num_prompts=1, num_generations=8, micro_batch_size=1),
    "cpu": dict(device="cpu", arch="", gpu_name="CPU"),
}


def configure(g, argv=None):
    """Apply presets and --key=value overrides from argv (default sys.argv[1:]) to the dict of globals `g`.

    Raises SystemExit with a clear message on an unknown key, an unknown preset/GPU, or a value of the wrong type.
    Returns the dict of {key: value} of all plain config values (for logging and checkpoints).
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    want_help = any(a in ("-h", "--help") for a in argv)  # printed after the presets, so it shows their values
    argv = [a for a in argv if a not in ("-h", "--help")]
    pairs = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if not arg.startswith("--"):
            sys.exit(f"error: unexpected argument {arg!r}; use --key=value")
        if "=" in arg:
            key, val = arg[2:].split("=", 1)
        elif i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            key, val = arg[2:], argv[i + 1]
            i += 1
        else:
            key, val = arg[2:], "True"  # a bare flag: --resume
        pairs.append((key, val))
        i += 1
    # presets first, so that explicit overrides win regardless of their order on the command line. A preset is
    # shared by all stages; it can tell them apart by `_stage` ("prepare", "sft", "rl", "evaluate").
    g.setdefault("_stage", os.path.splitext(os.path.basename(g.get("__file__", "")))[0])
    for key, val in pairs:
        if key == "preset":
            path = val if val.endswith(".py") else os.path.join(ROOT, "config", val + ".py")
            if not os.path.exists(path):
                known = sorted(f[:-3] for f in os.listdir(os.path.join(ROOT, "config")) if f.endswith(".py"))
                sys.exit(f"error: no preset {val!r} (known: {', '.join(known)})")
            exec(open(path).read(), g)
    for key, val in pairs:
        if key == "gpu":
            if val not in GPU_PRESETS:
                sys.exit(f"error: unknown --gpu {val!r} (known: {', '.join(GPU_PRESETS)})")
            for k, v in GPU_PRESETS[val].items():
                if k in g:
                    g[k] = v
            if "gpu" in g:
                g["gpu"] = val
    for key, val in pairs:
        if key in ("preset", "gpu"):
            continue
        if key not in g or key.startswith("_"):
            known = [k for k, v in g.items() if not k.startswith("_") and isinstance(v, (bool, int, float, str))]
            known += ["preset", "gpu"]                   # (a newcomer's --presett=demo meant --preset)
            close = difflib.get_close_matches(key, known, n=1)
            hint = f" (did you mean --{close[0]}?)" if close else ""
            script = os.path.basename(g.get("__file__", "")) or "the script"
            sys.exit(f"error: unknown config key --{key}{hint}; python {script} --help lists every setting")
        try:
            parsed = ast.literal_eval(val)
        except (ValueError, SyntaxError):
            parsed = val  # a plain string
        default = g[key]
        if default is not None and not isinstance(parsed, type(default)):
            if isinstance(default, float) and isinstance(parsed, int) and not isinstance(parsed, bool):
                parsed = float(parsed)
            elif isinstance(default, str):
                parsed = str(val)
            else:
                sys.exit(f"error: --{key}={val!r} should be {type(default).__name__}")
        g[key] = parsed
    if want_help:
        print_help(g)
        sys.exit(0)
    return {k: v for k, v in g.items() if not k.startswith("_") and isinstance(v, (int, float, bool, str, type(None)))}


def config_block(path):
    """[(section, [(key, comment)])] of a stage script's config block (the lines between the two "# ----" rules
    after "# config"): each `key = value  # comment` line, a comment line right below a setting continuing its
    comment, a comment line of its own starting a section (the first section is ""). Python's tokenizer finds the
    comments, so a '#' inside a string value is no comment."""
    import io
    import tokenize
    lines = open(path).read().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("# config")) + 1
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("# ---"))
    comments = {}
    for tok in tokenize.generate_tokens(io.StringIO("\n".join(lines[start:end]) + "\n").readline):
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0] - 1] = (tok.start[1], tok.string.lstrip("#").strip())
    groups, last = [("", [])], None
    for i, line in enumerate(lines[start:end]):
        m = re.match(r"(\w+)\s*=", line)
        col, text = comments.get(i, (None, ""))
        if m:
            groups[-1][1].append([m.group(1), text])
            last = groups[-1][1][-1]
        elif col == 0 and last is None and len(groups) > 1 and not groups[-1][1]:  # a section comment goes on
            groups[-1] = (groups[-1][0] + " " + text, [])
        elif col == 0:
            groups.append((text, []))
            last = None
        elif col is not None and last is not None:  # an indented comment line: the setting's comment goes on
            last[1] += " " + text
    return [(title, [tuple(x) for x in items]) for title, items in groups if items]


def print_help(g):
    """--help (issue 14 item 5): the first line of the script's docstring and its example commands, then one line
    per setting, --key=value (after any --preset) and the comment beside it in the config block, grouped by the
    block's section comments."""
    doc = (g.get("__doc__") or "").strip().splitlines()
    script = os.path.basename(g.get("__file__", "script.py"))
    presets = sorted(f[:-3] for f in os.listdir(os.path.join(ROOT, "config")) if f.endswith(".py"))
    out = [textwrap.fill(" ".join(doc[:doc.index("")] if "" in doc else doc[:1]), 120)]  # the first paragraph
    out += [line for line in doc if re.match(r"\s+(python|torchrun) ", line)]
    out.append("\n" + textwrap.fill(f"settings (--key=value; --preset=NAME: {', '.join(presets)} from config/; "
                                     f"--gpu=NAME: {', '.join(GPU_PRESETS)}), values after them. More: {script}'s "
                                     f"docstring, README.md.", 120))
    for title, items in config_block(g["__file__"]):
        if title:
            out.append(f"\n{title}:")
        for k, comment in items:
            v = g.get(k)
            setting = f"--{k}={v!r}" if isinstance(v, str) else f"--{k}={v}"
            out.append(f"  {setting:<34} {comment}".rstrip())
    try:
        print("\n".join(out), flush=True)
    except BrokenPipeError:  # `--help | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def check_device(device):
    """Exit with a one-line error when a stage is asked for CUDA on a machine without a visible CUDA GPU."""
    import torch
    if str(device).startswith("cuda") and not torch.cuda.is_available():
        sys.exit(f"error: device={device!r} but no CUDA GPU is visible to torch {torch.__version__}; "
                 "use --device=cpu (or --preset=tiny_cpu), or install a CUDA build of torch")


def config_keys(g):
    """The config values of a stage's globals, for saving next to its outputs."""
    return {k: v for k, v in g.items() if not k.startswith("_") and isinstance(v, (int, float, bool, str, type(None)))}


# -----------------------------------------------------------------------------
# Files

def parse_json_line(line, where):
    """json.loads of one line; ValueError "<where>: not valid JSON (<reason>: column <c>); ..." when it is not."""
    try:
        return json.loads(line.strip())
    except json.JSONDecodeError as e:
        raise ValueError(f"{where}: not valid JSON ({e.msg}: column {e.colno}); fix or delete that line") from None


def read_jsonl(path):
    """Rows of a JSON-lines file; raises ValueError naming the file and line for a malformed row."""
    with open(path) as f:
        return [parse_json_line(line, f"{path}:{n}") for n, line in enumerate(f, 1) if line.strip()]


def read_json(path):
    """A JSON file; raises ValueError naming the file, line and column when it is not valid JSON."""
    try:
        with open(path) as f:
            return json.load(f)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}:{e.lineno}: not valid JSON ({e.msg}: column {e.colno})") from None


def error_line(res):
    """One line saying why a bench result failed: the first line of its error, where an empty log tail ("...; log
    tail:" and nothing after it) says that the process printed nothing, and a non-empty one gives its last line
    (issue 14 item 4). "" for a result without an error."""
    err = str(res.get("error") or "").strip()
    head, sep, tail = err.partition("; log tail:")
    if sep:
        last = [s.strip() for s in tail.splitlines() if s.strip()]
        return head + ("; its last output line: " + last[-1][:200] if last else "; the process printed nothing")
    return err.splitlines()[0] if err else ""


def read_appended(path):
    """The rows of a JSON-lines file a stage appends to as it goes, [] when it does not exist. A line cut short by a
    kill is skipped with a warning (and the file gets its missing newline, so the next append starts a clean line)."""
    if not os.path.exists(path):
        return []
    with open(path, "rb+") as f:
        data = f.read()
        if data and not data.endswith(b"\n"):
            f.write(b"\n")
    rows = []
    for n, line in enumerate(data.decode(errors="replace").splitlines(), 1):
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            if line.strip():
                print(f"warning: {path}:{n}: unreadable line skipped (a run killed while writing it?)")
    return rows


def append_jsonl(path, row):
    """Append one row and flush it to disk at once, so a crash or Ctrl-C loses nothing already written."""
    with open(path, "a") as f:
        f.write(json.dumps(row) + "\n")
        f.flush()
        os.fsync(f.fileno())


def write_json_atomic(path, obj):
    """Write JSON through a temp file and rename, so a reader never sees half a file."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
    os.replace(tmp, path)


# -----------------------------------------------------------------------------
# Models

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
    asked, so that a mistake costs a second and one line instead of a minute of retries and a traceback (issue 14
    item 4): an existing folder must hold a model (config.json); a name that looks like a path (starts with / . ~,
    has more than one "/", or its first part is an existing folder, like out/sftt) but does not exist is a
    mistyped folder, and the closest names beside it are suggested; anything else is a Hugging Face name, loaded
    from the local cache without the network when $HF_HUB_OFFLINE is set or the Hub cannot be reached
    (hub_unreachable), an error when it is not cached then. Raises RuntimeError: one line, the cause and the fix."""
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
            near = difflib.get_close_matches(os.path.basename(os.path.normpath(path)), sorted(os.listdir(parent)), 3, 0.6)
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


def completion_logp(model, rows, pad_id, temp, chunk_size=512):
    """Per-token log-probs (and entropies) of completions under `model`. rows: dicts with prompt_ids and
    completion_ids (lists). Returns logp, entropy, mask, each (B, C) with C = longest completion; prompts are
    left-padded and position ids follow the attention mask, as in generate().

    Memory (issue 13): the decoder runs once; the LM head, logsumexp and the chosen token's logit then go over the
    completion in chunks of chunk_size tokens (rl.py's logp_chunk_size; 0 = one chunk), and with gradients each
    chunk is checkpointed (its logits are recomputed in backward), so no full-vocabulary fp32 tensor is ever held:
    B x chunk_size x V floats at a time instead of B x C x V (2.5 GB per 4k-token row at Qwen's 152k vocabulary,
    several times over with the log-softmax and entropy). Equal to the full log-softmax within 1e-5, gradients too
    (tests/test_rl.py; rl.py uses it as rl.completion_logp). Needs a plain output-embedding head (Llama, Qwen2...):
    a model with a final logit softcap is refused with ValueError."""
    import torch
    import torch.utils.checkpoint
    if getattr(model.config, "final_logit_softcapping", None):
        raise ValueError("completion_logp: models with final_logit_softcapping are not supported")
    dev = next(model.parameters()).device
    P = max(len(r["prompt_ids"]) for r in rows)
    C = max(len(r["completion_ids"]) for r in rows)
    ids = torch.full((len(rows), P + C), pad_id, dtype=torch.long)
    att = torch.zeros_like(ids)
    for i, r in enumerate(rows):
        p, c = r["prompt_ids"], r["completion_ids"]
        ids[i, P - len(p):P + len(c)] = torch.tensor(p + c)
        att[i, P - len(p):P + len(c)] = 1
    ids, att = ids.to(dev), att.to(dev)
    pos = (att.cumsum(-1) - 1).clamp(min=0)
    h = model.get_decoder()(input_ids=ids, attention_mask=att, position_ids=pos).last_hidden_state[:, P - 1:P + C - 1]
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
        return tok.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True)
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


# -----------------------------------------------------------------------------
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


TORCHRUN_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
                "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID",
                "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_USE_AGENT_STORE",
                "TORCH_NCCL_ASYNC_ERROR_HANDLING")


def run_script(script, args):
    """Run another stage script of this repo as a plain single-process subprocess (torchrun's variables removed, so
    a stage started from one rank never tries to join that rank's process group) and wait for it.

    The stage runs in a session of its own, so a Ctrl-C in the terminal reaches only this process, which passes it
    on once (SIGINT), as it passes on a SIGTERM (what `kill` and `timeout` send to this process alone): the stage's
    own handler then saves what it has and exits (issue 14 item 3). Returns (exit status, the signal passed on or
    None); the caller says what it means."""
    import signal
    import subprocess
    env = {k: v for k, v in os.environ.items() if k not in TORCHRUN_ENV}
    env["CUDAL1_CHAINED"] = "1"      # the stage's own "continue with ..." hint would contradict the chain's
    print(f"$ python {script} {' '.join(args)}", flush=True)
    got, proc = [], []

    def forward(sig, frame):
        got.append(sig)
        if proc and proc[0].poll() is None:
            proc[0].send_signal(sig)
    # installed before the stage starts: it then inherits the default SIGINT action even where this process was
    # started with SIGINT ignored (a shell's background job), and a signal during its start is not lost
    old = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        proc.append(subprocess.Popen([sys.executable, os.path.join(ROOT, script)] + list(args), env=env,
                                     start_new_session=True))
        if got:
            proc[0].send_signal(got[0])
        rc = proc[0].wait()
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        if proc and proc[0].poll() is None:  # this process is failing: do not leave the stage running on its own
            proc[0].kill()
    return rc, (got[0] if got else None)


def exit_on_interrupt(hint="rerun the same command to continue"):
    """For a stage script's main: SIGTERM raises KeyboardInterrupt as Ctrl-C does, so the script's own handlers (which
    save what they have) run for both; one that no handler stops ends the script with one line and exit status 130,
    not a traceback (issue 14 item 3)."""
    import signal
    script = os.path.basename(sys.argv[0])

    def on_term(sig, frame):
        raise KeyboardInterrupt("SIGTERM")
    signal.signal(signal.SIGTERM, on_term)
    hook = sys.excepthook

    def excepthook(kind, value, tb):
        if not issubclass(kind, KeyboardInterrupt):
            return hook(kind, value, tb)
        sys.stdout.flush()
        print(f"{script} interrupted ({str(value) or 'Ctrl-C'}): what it had written is kept; {hint}", file=sys.stderr,
              flush=True)
        os._exit(130)
    sys.excepthook = excepthook
