"""
What the stages share: configuration, the prompts, code extraction, and model loading/generation.

Kept in one small module because prepare.py, sft.py, rl.py and evaluate.py all need exactly the same prompt text
and the same parsing of answers: if two stages formatted a prompt differently, a model trained by one would be
evaluated on text it never saw.
"""
import ast
import json
import os
import re
import sys

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
            sys.exit(f"error: unknown config key --{key}")
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
    return {k: v for k, v in g.items() if not k.startswith("_") and isinstance(v, (int, float, bool, str, type(None)))}


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

def read_jsonl(path):
    """Rows of a JSON-lines file; raises ValueError naming the file and line for a malformed row."""
    rows = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise ValueError(f"{path}:{n}: not valid JSON ({e})") from None
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
# Prompts. CUDA-L1 §3 (REFERENCE.md §1.3): the contrastive prompt holds the task, the reference code and N earlier
# kernels each with its measured speedup; the answer has three sections that start with "## "; the prompt forbids
# caching results across calls and changing hyperparameters. The exact wording was not published; this is ours.

SECTIONS = ("## Performance Analysis", "## Algorithm Design", "## Code Implementation")

_TASK = (
    "You are an expert in writing CUDA kernels for PyTorch, optimising for the {gpu_name} GPU.\n"
    "Write `ModelNew`, a drop-in replacement for the reference `Model` below: same constructor and forward "
    "arguments, same outputs (checked with atol = rtol = 1e-2 on fresh random inputs), but faster. Write custom CUDA "
    "kernels and build them inside the module with torch.utils.cpp_extension.load_inline.\n"
)
_RULES = (
    "Restrictions:\n"
    "1. Do not cache or reuse results or intermediate values across forward calls; every call must compute its "
    "output from its inputs.\n"
    "2. Do not change the hyperparameters of the task (batch size, dimensions, dtypes), nor get_inputs or "
    "get_init_inputs.\n"
)
_ANSWER = (
    "Answer in exactly three sections, in this order, each starting with '## ':\n"
    "## Performance Analysis\n{analysis_hint}\n"
    "## Algorithm Design\nThe plan for your implementation.\n"
    "## Code Implementation\nOne complete Python module in a ```python block that defines ModelNew.\n"
)


def stage1_prompt(task_src, gpu_name="NVIDIA A100"):
    """The one-shot prompt of CUDA-L1 stage 1 (and of plain evaluation): task and reference code only."""
    return (_TASK.format(gpu_name=gpu_name) + "\nReference implementation:\n```python\n" + task_src.strip() + "\n```\n\n"
            + _RULES + "\n" + _ANSWER.format(analysis_hint="The bottlenecks of the reference and how to remove them."))


def contrastive_prompt(task_src, exemplars, gpu_name="NVIDIA A100"):
    """The CUDA-L1 stage-3 prompt. exemplars: list of (code, speedup_x) pairs, speedup = t_ref / t_kernel (x)."""
    parts = [_TASK.format(gpu_name=gpu_name), "\nReference implementation:\n```python\n", task_src.strip(), "\n```\n\n"]
    if exemplars:
        parts.append("Earlier implementations with their measured speedups over the reference (higher is faster):\n\n")
        for i, (code, speedup) in enumerate(exemplars, 1):
            parts.append(f"Implementation {i} (speedup {speedup:.2f}x):\n```python\n{code.strip()}\n```\n\n")
        hint = ("Compare the implementations above: which is faster and why, what limits them, and which "
                "techniques none of them uses yet.")
    else:
        hint = "The bottlenecks of the reference and how to remove them."
    parts += [_RULES, "\n", _ANSWER.format(analysis_hint=hint)]
    return "".join(parts)


def format_response(analysis, design, code):
    """An answer in the three-section format (used to build SFT targets from known kernels)."""
    return (f"{SECTIONS[0]}\n{analysis.strip()}\n\n{SECTIONS[1]}\n{design.strip()}\n\n"
            f"{SECTIONS[2]}\n```python\n{code.strip()}\n```\n")


_FENCE = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.S)


def extract_code(completion):
    """Code of the `## Code Implementation` section of an answer.

    Returns (code, None) on success or (None, reason) for a format error: a missing or out-of-order section, no
    fenced code block after the last header, or code that does not define ModelNew. CUDA-L1 §3: an answer that
    breaks the format earns the failure reward (rl.py counts it as a format error).
    """
    pos = []
    for h in SECTIONS:
        m = re.search(r"^" + re.escape(h) + r"[ \t]*$", completion, re.M)
        if m is None:
            return None, f"missing section {h!r}"
        pos.append(m.start())
    if pos != sorted(pos):
        return None, "sections out of order"
    blocks = _FENCE.findall(completion[pos[2]:])
    if not blocks:
        return None, "no ```python block in the Code Implementation section"
    code = max(blocks, key=len)  # the module; smaller blocks are usually usage snippets
    if not re.search(r"^class\s+ModelNew\b", code, re.M):
        return None, "the code does not define class ModelNew"
    return code.strip() + "\n", None


def parse_variant(src):
    """Split a project-written kernel file into (code, meta). Its first lines are `# @key: value` comments
    (expect, design, analysis) which are not part of the code a model should write."""
    meta, lines = {}, []
    for line in src.splitlines():
        m = re.match(r"#\s*@(\w+):\s*(.*)$", line)
        if m and not lines:
            meta[m.group(1)] = m.group(2).strip()
        else:
            lines.append(line)
    return "\n".join(lines).strip() + "\n", meta


# -----------------------------------------------------------------------------
# Models

def load_model(name_or_path, device="cpu", dtype="float32"):
    """(model, tokenizer) from a Hugging Face name or a local folder (what sft.py and rl.py save).

    Raises RuntimeError with the model name and the cause when it cannot be loaded (missing folder, no network,
    unknown architecture), instead of a long transformers traceback.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    try:
        tok = AutoTokenizer.from_pretrained(name_or_path)
        model = AutoModelForCausalLM.from_pretrained(name_or_path, dtype=getattr(torch, dtype))
    except Exception as e:  # OSError, ValueError, HTTP errors... all mean the same thing to the user
        raise RuntimeError(f"cannot load model {name_or_path!r}: {type(e).__name__}: {e}") from e
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return model.to(device), tok


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


def generate(model, tok, prompts, num_generations, max_new_tokens, temperature=1.0, top_p=1.0, batch_size=16):
    """Sample `num_generations` completions for each prompt with transformers' generate.

    Yields dicts (one per completion, grouped by prompt, in order) with prompt_ids, completion_ids (list of int,
    ending with EOS unless truncated), text and truncated (bool: no EOS within max_new_tokens).
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
                                 eos_token_id=tok.eos_token_id)
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
