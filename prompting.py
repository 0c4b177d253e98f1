"""
The prompts and the parsing of answers, shared by every stage (prepare.py, sft.py, rl.py, evaluate.py): if two stages
formatted a prompt differently, a model trained by one would be evaluated on text it never saw.
"""
import re

# Prompts. CUDA-L1 §3 (REFERENCE.md §1.3): the contrastive prompt holds the task, the reference code and N earlier
# kernels each with its measured speedup; the answer has three sections that start with "## "; the prompt forbids
# caching results across calls and changing hyperparameters. Table 3 of the paper shows its structure; the exact
# wording here is ours.

SECTIONS = ("## Performance Analysis", "## Algorithm Design", "## Code Implementation")
NUM_EXEMPLARS = 2  # kernels in the contrastive prompts of prepare.py's SFT data and of evaluate.py
CPU = "CPU"  # the gpu_name of the CPU task (common.GPU_PRESETS["cpu"]): candidates run and are timed on the CPU

_TASK = (
    "You are an expert in writing CUDA kernels for PyTorch, optimising for the {gpu_name} GPU.\n"
    "Write `ModelNew`, a drop-in replacement for the reference `Model` below: same constructor and forward "
    "arguments, same outputs (checked with atol = rtol = 1e-2 on fresh random inputs), but faster. Write custom CUDA "
    "kernels and build them inside the module with torch.utils.cpp_extension.load_inline.\n"
)
_TASK_CPU = (
    "You are an expert in optimising PyTorch for the CPU.\n"
    "Write `ModelNew`, a drop-in replacement for the reference `Model` below: same constructor and forward "
    "arguments, same outputs (checked with atol = rtol = 1e-2 on fresh random inputs), but faster on the CPU. Write "
    "ModelNew in PyTorch, or in C++ built inside the module with torch.utils.cpp_extension.load_inline.\n"
)
_RULES = (
    "Restrictions:\n"
    "1. Do not cache or reuse results or intermediate values across forward calls; every call must compute its "
    "output from its inputs.\n"
    "2. Do not change the hyperparameters of the task (batch size, dimensions, dtypes), nor get_inputs or "
    "get_init_inputs.\n"
)
_REQUIREMENTS = (
    "Requirements:\n"
    "1. The code must build and run as written on current GPUs (it is timed on the {gpu_name}): a module that does "
    "not compile, or crashes, earns nothing.\n"
    "2. ModelNew must compute what Model computes: an output that does not match the reference scores zero, however "
    "fast it is.\n"
    "3. The Code Implementation section holds one complete Python module, not a fragment or a diff.\n"
)
_REQUIREMENTS_CPU = _REQUIREMENTS.replace(
    "on current GPUs (it is timed on the {gpu_name})", "on the CPU (it is timed there, on a few cores)")
_ANSWER = (
    "Answer in exactly three sections, in this order, each starting with '## ':\n"
    "## Performance Analysis\n{analysis_hint}\n"
    "## Algorithm Design\nThe plan for your implementation.\n"
    "## Code Implementation\nOne complete Python module in a ```python block that defines ModelNew.\n"
)


def _task(gpu_name):
    """The prompt's first paragraph: CUDA kernels for the named GPU, or PyTorch / C++ when gpu_name is CPU."""
    return _TASK_CPU if gpu_name == CPU else _TASK.format(gpu_name=gpu_name)


def stage1_prompt(task_src, gpu_name="NVIDIA A100"):
    """The one-shot prompt of CUDA-L1 stage 1 (and of plain evaluation): task and reference code only."""
    return (_task(gpu_name) + "\nReference implementation:\n```python\n" + task_src.strip() + "\n```\n\n"
            + _RULES + "\n" + _ANSWER.format(analysis_hint="The bottlenecks of the reference and how to remove them."))


def contrastive_prompt(task_src, exemplars, gpu_name="NVIDIA A100"):
    """The CUDA-L1 stage-3 prompt. exemplars: list of (code, speedup_x) pairs, speedup = t_ref / t_kernel (x).
    Carries every element of the paper's Table 3 in our words (REFERENCE.md §1.3): the task and reference,
    the exemplars with their speedups, the requirements (builds and runs on current GPUs, a mismatch scores zero, a
    complete module), the two restrictions, and the three "## " sections, the first holding the five analysis
    questions (which is fastest and why, what limits them, unused techniques, which strategies hold the most
    potential, where the largest remaining opportunity lies). gpu_name "CPU" (prompting.CPU) asks for PyTorch or
    C++ timed on the CPU instead."""
    parts = [_task(gpu_name), "\nReference implementation:\n```python\n", task_src.strip(), "\n```\n\n"]
    if exemplars:
        parts.append("Earlier implementations with their measured speedups over the reference (higher is faster):\n\n")
        for i, (code, speedup) in enumerate(exemplars, 1):
            parts.append(f"Implementation {i} (speedup {speedup:.2f}x):\n```python\n{code.strip()}\n```\n\n")
        hint = ("Compare the implementations above and answer, in this order: (1) which one is fastest, and why; "
                "(2) which bottlenecks limit each of them; (3) which optimisation techniques none of them uses yet; "
                "(4) which strategies hold the most potential for a further speedup; (5) where the largest remaining "
                "opportunity lies.")
    else:
        hint = "The bottlenecks of the reference and how to remove them."
    requirements = _REQUIREMENTS_CPU if gpu_name == CPU else _REQUIREMENTS.format(gpu_name=gpu_name)
    parts += [requirements, "\n", _RULES, "\n", _ANSWER.format(analysis_hint=hint)]
    return "".join(parts)


def format_response(analysis, design, code):
    """An answer in the three-section format (used to build SFT targets from known kernels)."""
    return (f"{SECTIONS[0]}\n{analysis.strip()}\n\n{SECTIONS[1]}\n{design.strip()}\n\n"
            f"{SECTIONS[2]}\n```python\n{code.strip()}\n```\n")


_FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})[ \t]*([^`\s]*)[^`]*$")  # CommonMark: info string without backticks
PYTHON_TAGS = ("python", "py", "python3", "py3", "")  # fence info strings (lower case) that may hold the module


def fenced_blocks(text):
    """The closed fenced code blocks of a Markdown text, in order: [(lang, code)], lang = the first word of the info
    string in lower case ("" when there is none). CommonMark rules: a line of 3+ backticks (or tildes), indented by at
    most 3 spaces, opens a block; only a line of at least as many of the same character, and nothing else, closes it,
    so prose between two blocks is never inside one. A block still open at the end of the text is dropped."""
    blocks, fence, lang, buf = [], None, "", []
    for line in text.splitlines():
        if fence is None:
            m = _FENCE_OPEN.match(line)
            if m:
                fence, lang, buf = m.group(1), m.group(2).lower(), []
        elif re.match(r"^ {0,3}" + re.escape(fence[0]) + "{%d,}[ \t]*$" % len(fence), line):
            blocks.append((lang, "\n".join(buf)))
            fence = None
        else:
            buf.append(line)
    return blocks


def extract_code(completion):
    """Code of the `## Code Implementation` section of an answer.

    Returns (code, None) on success or (None, reason) for a format error: a missing or out-of-order section, no
    closed fenced block after the last header, or no Python block that defines ModelNew. The code is the Python
    module defining `class ModelNew`, wherever it sits among the section's blocks: answers as LLMs write them put a
    ```cpp / ```cuda block with the kernel source first, tag the module ```Python, ```py or not at all, add shell
    lines or a usage snippet, with prose between. Blocks tagged with another language are never taken;
    among several Python blocks defining ModelNew the longest wins (drafts come before the full module). CUDA-L1 §3: an
    answer that breaks the format earns the failure reward (rl.py counts it as a format error).
    """
    pos = []
    for h in SECTIONS:
        m = re.search(r"^" + re.escape(h) + r"[ \t]*$", completion, re.M)
        if m is None:
            return None, f"missing section {h!r}"
        pos.append(m.start())
    if pos != sorted(pos):
        return None, "sections out of order"
    blocks = [code for lang, code in fenced_blocks(completion[pos[2]:]) if lang in PYTHON_TAGS]
    if not blocks:
        return None, "no ```python block in the Code Implementation section"
    modules = [code for code in blocks if re.search(r"^class\s+ModelNew\b", code, re.M)]
    if not modules:
        return None, "the code does not define class ModelNew"
    return max(modules, key=len).strip() + "\n", None


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
