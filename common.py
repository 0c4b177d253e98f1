"""
What every stage script shares besides the prompts (prompting.py): configuration and --help, the device check,
JSON lines, and the exit on Ctrl-C. Models, generation and data parallelism live in training/.
"""
import ast
import difflib
import json
import os
import re
import sys
import textwrap

ROOT = os.path.dirname(os.path.abspath(__file__))

# -----------------------------------------------------------------------------
# Configuration, nanoGPT style: each stage script declares its settings as module-level globals, then calls
# configure(globals()). Command-line forms accepted (later ones win):
#   --preset=tiny      exec config/tiny.py into the globals (a preset is plain Python assignments)
#   --gpu=a100         apply GPU_PRESETS['a100'] (nvcc arch, the GPU name in the prompt, batch sizes)
#   --key=value / --key value   override one global; the value is parsed as a Python literal when it parses,
#                               and must have the type of the default (ints are accepted for floats).
# A key must be in the script's config block (or, for rl.py, in that of a stage it chains): a preset serves every
# stage, so it may set keys a script never reads.

GPU_PRESETS = {
    # arch: TORCH_CUDA_ARCH_LIST value for nvcc; gpu_name: what the prompt tells the model it is optimising for.
    # The batch sizes are for the default 1.5B policy (float32 weights and AdamW, bf16 autocast) on one card of
    # that GPU; scale them with --key=value for other models. num_prompts is per step over all ranks: under torchrun
    # rl.py rounds it up to a multiple of the ranks (a100's 4 on 8 GPUs: 8, one per GPU), so any GPU count works.
    "a100": dict(device="cuda", arch="8.0", gpu_name="NVIDIA A100", num_prompts=4, num_generations=8,
                 micro_batch_size=1),
    "h100": dict(device="cuda", arch="9.0", gpu_name="NVIDIA H100", num_prompts=4, num_generations=8,
                 micro_batch_size=1),
    "h200": dict(device="cuda", arch="9.0", gpu_name="NVIDIA H200", num_prompts=8, num_generations=8,
                 micro_batch_size=2),
    "h20": dict(device="cuda", arch="9.0", gpu_name="NVIDIA H20", num_prompts=4, num_generations=8,
                micro_batch_size=1),
    "l40": dict(device="cuda", arch="8.9", gpu_name="NVIDIA L40", num_prompts=2, num_generations=8,
                micro_batch_size=1),
    "rtx3090": dict(device="cuda", arch="8.6", gpu_name="NVIDIA GeForce RTX 3090", num_prompts=1, num_generations=8,
                    micro_batch_size=1),
    "cpu": dict(device="cpu", arch="", gpu_name="CPU"),
}


def parse_pairs(argv):
    """[(key, value string)] of a command line's settings: --key=value, --key value, or a bare --flag (= "True").
    Raises SystemExit on an argument that is none of these."""
    pairs, i = [], 0
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
    return pairs


def configure(g, argv=None, passes_on=None):
    """Apply presets and --key=value overrides from argv (default sys.argv[1:]) to the dict of globals `g`.
    passes_on(g): the stage scripts this one runs with its command line's settings (rl.py's chain), whose settings
    it takes too; any other key that is not in the script's config block is refused, although a preset that serves
    every stage has set it in `g` (sft.py's --num_generations would otherwise be taken and never used).

    Raises SystemExit with a clear message on an unknown key, an unknown preset/GPU, or a value of the wrong type.
    Returns the dict of {key: value} of all plain config values (for logging and checkpoints).
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    want_help = any(a in ("-h", "--help") for a in argv)  # printed after the presets, so it shows their values
    pairs = parse_pairs([a for a in argv if a not in ("-h", "--help")])
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
            known += ["preset", "gpu"]                   # (so --presett=demo suggests --preset)
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
    script = g.get("__file__") or ""
    if config_block(script) if script else False:
        others = list(passes_on(g)) if passes_on else []
        known = {k for path in [script] + [os.path.join(ROOT, s) for s in others]
                 for _, items in config_block(path) for k, _ in items}
        stray = [k for k, _ in pairs if k not in ("preset", "gpu") and k not in known]
        if stray:
            owners = [f for f in sorted(os.listdir(ROOT)) if f.endswith(".py") and stray[0] in
                      {k for _, items in config_block(os.path.join(ROOT, f)) for k, _ in items}]
            sys.exit(f"error: --{stray[0]} is a setting of {' and '.join(owners) or 'another stage'}, not of "
                     f"{', '.join([os.path.basename(script)] + others)}; python {os.path.basename(script)} --help "
                     "lists the settings")
    if str(g.get("device", "")).startswith("cpu") and "gpu_name" in g and "gpu_name" not in dict(pairs):
        g["gpu_name"] = "CPU"  # candidates run and are timed on the CPU: the prompts say so (prompting.CPU)
    if want_help:
        print_help(g)
        sys.exit(0)
    if g.get("_announce"):   # a preset's line on the choice it made, once every setting is accepted
        print(g.pop("_announce"), flush=True)
    return {k: v for k, v in g.items() if not k.startswith("_") and isinstance(v, (int, float, bool, str, type(None)))}


def config_block(path):
    """[(section, [(key, comment)])] of a script's config block (the lines after "# config", else after the first
    "# ----" rule, up to the next rule; none: []): each `key = value  # comment` line, a comment line right below a
    setting continuing its comment, a comment line of its own starting a section (the first section is ""). Python's
    tokenizer finds the comments, so a '#' inside a string value is no comment."""
    import io
    import tokenize
    lines = open(path).read().splitlines()
    rules = [i for i, line in enumerate(lines) if line.startswith("# ---")]  # (scripts/ may have no "# config")
    start = next((i + 1 for i, line in enumerate(lines) if line.startswith("# config")),
                 rules[0] + 1 if rules else len(lines))
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("# ---")), start)
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
    """--help: the first line of the script's docstring and its example commands, then one line
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
                 "use --gpu=cpu (or --preset=tiny_cpu), or install a CUDA build of torch")
    # once per command: the stages rl.py chains inherit the mark, so they do not read the load their own
    # earlier stages made
    if str(device) == "cpu" and os.environ.get("RANK", "0") == "0" and not os.environ.get("CUDAL1_LOAD_CHECKED"):
        os.environ["CUDAL1_LOAD_CHECKED"] = "1"
        if line := busy_line():
            print(line, flush=True)


def busy_line(load=None, cores=None):
    """A warning when other work keeps this machine's cores busy (1-minute load average at least 1.5 and at least
    three quarters of the cores this process may use), else None. On the CPU device both the candidates and their
    references are timed on those cores, so speedups get noisier and a run takes several times the README's figures."""
    load = os.getloadavg()[0] if load is None else load
    cores = len(os.sched_getaffinity(0)) if cores is None else cores
    if load < max(1.5, 0.75 * cores):
        return None
    return (f"warning: this machine is busy (load {load:.1f} on {cores} cores): CPU timings are noisier and the run "
            "slower than on idle cores")


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
    "" for a result without an error."""
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


def exit_on_interrupt(hint="rerun the same command to continue"):
    """For a stage script's main: SIGTERM raises KeyboardInterrupt as Ctrl-C does, so the script's own handlers (which
    save what they have) run for both; one that no handler stops ends the script with one line and exit status 130,
    not a traceback. One that lands in a destructor, where Python would print and drop it, is sent again."""
    import signal, threading
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
    unraisable = sys.unraisablehook

    def unraisablehook(info):      # Ctrl-C landing in a destructor (the GC runs them anywhere): Python would print it
        if isinstance(info.exc_value, KeyboardInterrupt):    # and drop it; sent again, 10 ms later (sent from here,
            sig = signal.SIGTERM if str(info.exc_value) == "SIGTERM" else signal.SIGINT   # it would land in the hook)
            threading.Timer(0.01, os.kill, (os.getpid(), sig)).start()
            return
        unraisable(info)
    sys.unraisablehook = unraisablehook
