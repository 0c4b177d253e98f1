"""Calibration of the judge's precision-downgrade rule on every kernel we have (REFERENCE.md §4c).

    python scripts/precision_calibration.py [--device cuda|cpu] [--out results/bench/precision_calibration.md]

The rule (judge.py): a correct candidate is a `precision_downgrade` when its error against a float64 reference,
err = ||out - ref64|| / ||ref64||, exceeds threshold = max(PREC_RATIO x ref_err, PREC_HALF x half_err), where
ref_err is the fp32 reference's own error and half_err that of the float64 reference run on operands rounded to a
10-bit mantissa. The target: zero false positives on legitimate kernels and every downgrade flagged.

Candidates, all in ONE bench.evaluate_many with static checks OFF (the run-time measurement alone decides) and
check_only (the correctness trials, where the judge measures precision; no timing):
  legit      tests/legit/*.py (task from its `task:` line); the correct kernels of data/tiny_cuda (`# @expect:
             correct`, task level1/<folder>, read as prepare.py reads them: prompting.parse_variant); the correct
             kernels of data/tiny_cpu (its own tasks); the CUDA-L1 sample kernels (--sample) against their own
             ref_code, except the two below;
  downgrade  tests/hacks/precision_*.py;
  policy     CUDA-L1's L1-1 (times fp32, fp16 and a layout trick at its first call and keeps the fastest: an fp16
             matmul only when fp16 wins that race) and L2-48 (turns on cudnn.benchmark; with cudnn.allow_tf32,
             PyTorch's default, the autotuner may pick a TF32 convolution): shown, counted on neither side.
Prints a markdown table (kind, candidate, task, verdict, err, ref_err, half_err, threshold, err/threshold) and one
summary line: false positives among the legitimate kernels, downgrades caught, and the closest calls on each side.

--device=cpu evaluates only what a CPU can (no cuda_sources, no .cuda(), no "GPU only" in the docstring), on
KernelBench tasks shrunk by shrink_task (module-level sizes above --cpu_cap set to it, spatial sizes to 32,
batch sizes to 16); the tiny_cpu tasks as they are. Exit status 0 if the rule made no mistake, 1 otherwise.
"""
import argparse, ast, glob, json, math, os, re, sys, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import torch  # noqa: E402

import bench  # noqa: E402
import prompting  # noqa: E402
from harness import judge  # noqa: E402

POLICY = {(1, 1), (2, 48)}   # CUDA-L1 samples whose precision depends on a choice made at run time (docstring)
CPU_CAPS = dict(batch_size=16, height=32, width=32, depth=32, length=256)   # per name, on --device=cpu
_GPU_ONLY = re.compile(r"\bcuda_sources\s*=|\.cuda\(\)|device=['\"]cuda['\"]")


def shrink_task(src, cap=256, caps=None):
    """A task module with every module-level integer size above `cap` (or caps[name]) set to it: `N = 2048 * 2`,
    `height = width = 128`, `depth, height, width = 16, 32, 32`. Other statements are kept as they are."""
    caps = caps or {}
    lines = src.splitlines()
    for node in ast.parse(src).body:
        if not isinstance(node, ast.Assign) or node.lineno != node.end_lineno:
            continue
        try:
            value = eval(compile(ast.Expression(node.value), "<size>", "eval"), {})
        except Exception:
            continue
        pairs = []
        for t in node.targets:
            if isinstance(t, ast.Name):
                pairs.append((t.id, value))
            elif isinstance(t, ast.Tuple) and isinstance(value, tuple) and len(t.elts) == len(value) and \
                    all(isinstance(e, ast.Name) for e in t.elts):
                pairs += [(e.id, v) for e, v in zip(t.elts, value)]
        if not pairs or not all(isinstance(v, int) and not isinstance(v, bool) for _, v in pairs):
            continue
        new = [(n, min(v, caps.get(n, cap))) for n, v in pairs]
        if new != pairs:
            lines[node.lineno - 1] = "; ".join(f"{n} = {v}" for n, v in new)
    return "\n".join(lines) + "\n"


def header(src):
    """(task, expect) from a suite file's docstring lines `task: ...` and `expect: ...`."""
    task = re.search(r"^(?:\"\"\")?task: (\S+)", src, re.M)
    expect = re.search(r"^expect: (.+)$", src, re.M)
    return (task.group(1) if task else None), (expect.group(1).strip() if expect else "")


def runs_on_cpu(src):
    doc = ast.get_docstring(ast.parse(src)) or ""
    return not _GPU_ONLY.search(src) and "GPU only" not in doc


def candidates(kb, sample):
    """[(kind, name, task name, task source or None (KernelBench), candidate source)]."""
    out = []
    for f in sorted(glob.glob(os.path.join(ROOT, "tests", "legit", "*.py"))):
        src = open(f).read()
        out.append(("legit", "legit/" + os.path.basename(f)[:-3], header(src)[0], None, src))
    for f in sorted(glob.glob(os.path.join(ROOT, "data", "tiny_cuda", "*", "*.py"))):
        code, meta = prompting.parse_variant(open(f).read())
        if meta.get("expect", "correct") == "correct":
            stem = os.path.basename(os.path.dirname(f))
            out.append(("legit", f"tiny_cuda/{stem}/{os.path.basename(f)[:-3]}", f"level1/{stem}", None, code))
    for f in sorted(glob.glob(os.path.join(ROOT, "data", "tiny_cpu", "*", "*.py"))):
        stem = os.path.basename(os.path.dirname(f))
        task_file = os.path.join(ROOT, "data", "tiny_cpu", "tasks", stem + ".py")
        if stem == "tasks" or not os.path.exists(task_file):
            continue
        code, meta = prompting.parse_variant(open(f).read())
        if meta.get("expect", "correct") == "correct":
            out.append(("legit", f"tiny_cpu/{stem}/{os.path.basename(f)[:-3]}", f"tiny_cpu/{stem}",
                        open(task_file).read(), code))
    if sample and os.path.exists(sample):
        for line in open(sample):
            d = json.loads(line)
            if not isinstance(d.get("custom_code"), str) or d["custom_code"] in ("", "None"):
                continue
            kind = "policy" if (d["level_id"], d["task_id"]) in POLICY else "legit"
            out.append((kind, f"cudal1/L{d['level_id']}_{d['task_id']}", f"level{d['level_id']}/{d['task_id']}",
                        d["ref_code"], d["custom_code"]))
    for f in sorted(glob.glob(os.path.join(ROOT, "tests", "hacks", "precision_*.py"))):
        src = open(f).read()
        out.append(("downgrade", "hacks/" + os.path.basename(f)[:-3], header(src)[0], None, src))
    return out


def fmt(x):
    return "-" if x is None else f"{x:.3g}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", choices=["cuda", "cpu"],
                    help="where to evaluate (cpu: only the candidates a CPU can run, on shrunk tasks)")
    ap.add_argument("--kernelbench", default=os.environ.get("KERNELBENCH_DIR") or
                    os.path.join(ROOT, "..", "shared", "kernelbench"), help="KernelBench folder (level1/, ...)")
    ap.add_argument("--sample", default=os.path.join(ROOT, "..", "shared", "cudal1_sample", "a100_sample.jsonl"),
                    help="CUDA-L1 sample kernels (JSON lines with ref_code and custom_code); missing = skipped")
    ap.add_argument("--trials", type=int, default=5, help="correctness trials per candidate (precision in each)")
    ap.add_argument("--cpu_cap", type=int, default=256, help="--device=cpu: largest module-level size of a task")
    ap.add_argument("--build_root", default=None, help="build cache (default: bench's, $CUDAL1_BUILD_ROOT)")
    ap.add_argument("--timeout_s", type=float, default=900.0, help="seconds per evaluation, build included")
    ap.add_argument("--out", default=None, help="also write the table and the summary to this markdown file")
    a = ap.parse_args(argv)
    if a.device == "cuda" and not torch.cuda.is_available():
        sys.exit("error: --device cuda but torch sees no CUDA GPU; use --device cpu")
    if not os.path.isdir(a.kernelbench):
        sys.exit(f"error: KernelBench not found at {a.kernelbench} (--kernelbench or $KERNELBENCH_DIR)")
    jobs, rows, skipped = [], [], []
    for kind, name, task, task_src, src in candidates(a.kernelbench, a.sample):
        if a.device == "cpu" and not runs_on_cpu(src):
            skipped.append(name)
            continue
        if task_src is None:
            path = os.path.join(a.kernelbench, task + ".py")
            if not os.path.exists(path):
                skipped.append(f"{name} (no task {task})")
                continue
            task_src = open(path).read()
        if a.device == "cpu" and not task.startswith("tiny_cpu/"):
            task_src = shrink_task(task_src, a.cpu_cap, CPU_CAPS)
        jobs.append((name, task_src, src))
        rows.append((kind, name, task))
    t0 = time.time()

    def on_result(i, r):                  # one line as each finishes (a long run shows where it is)
        p = r.get("precision") or {}
        ratio = p["err"] / p["threshold"] if p.get("err") is not None and p.get("threshold") else None
        print(f"[calibration] {i + 1}/{len(jobs)} {rows[i][1]}: {r['status']}"
              f"{' (' + r['hack'] + ')' if r.get('hack') else ''} err/threshold {fmt(ratio)}", file=sys.stderr,
              flush=True)
    results = bench.evaluate_many(jobs, device=a.device, static_checks=False, check_only=True,
                                  num_correct_trials=a.trials, timeout_s=a.timeout_s, build_root=a.build_root,
                                  on_result=on_result)
    lines = [f"Precision calibration on {a.device} ({results[0]['device_name'] if results else '?'}), "
             f"torch {torch.__version__}, PREC_RATIO={judge.PREC_RATIO:g}, PREC_HALF={judge.PREC_HALF:g}, "
             f"{len(jobs)} candidates in {time.time() - t0:.0f} s"
             + (f"; skipped: {', '.join(skipped)}" if skipped else ""),
             "", "| kind | candidate | task | verdict | err | ref_err | half_err | threshold | err/threshold |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    legit_ratios, down_ratios, false_pos, missed, policy = [], [], [], [], []
    for (kind, name, task), r in zip(rows, results):
        p = r.get("precision") or {}
        err, thr = p.get("err"), p.get("threshold")
        ratio = err / thr if err is not None and thr else None
        verdict = r["status"] + (f" ({r['hack']})" if r.get("hack") else "")
        if p.get("skipped"):
            verdict += f"; precision skipped: {p['skipped']}"
        elif r["status"] not in ("ok", "hack"):
            verdict += ": " + (str(r.get("error") or "").strip().splitlines() or [""])[0][:80].replace("|", "/")
        lines.append(f"| {kind} | {name} | {task} | {verdict} | {fmt(err)} | {fmt(p.get('ref_err'))} | "
                     f"{fmt(p.get('half_err'))} | {fmt(thr)} | {fmt(ratio)} |")
        flagged = r.get("hack") == "precision_downgrade"
        if kind == "legit":
            false_pos += [name] if flagged else []
            legit_ratios += [(ratio, name)] if ratio is not None and math.isfinite(ratio) else []
        elif kind == "downgrade":
            missed += [] if flagged else [name]
            down_ratios += [(ratio, name)] if ratio is not None and math.isfinite(ratio) else []
        else:
            policy.append(f"{name}: {verdict}, err/threshold {fmt(ratio)}")
    n_legit = sum(k == "legit" for k, _, _ in rows)
    n_down = sum(k == "downgrade" for k, _, _ in rows)
    unmeasured = [n for (k, n, _), r in zip(rows, results) if k == "legit" and
                  (r.get("precision") or {}).get("err") is None and r.get("hack") != "precision_downgrade"]
    closest_legit = max(legit_ratios, default=None)
    closest_down = min(down_ratios, default=None)
    summary = (f"false positives among legit: {len(false_pos)} of {n_legit}"
               + (f" ({', '.join(false_pos)})" if false_pos else "")
               + f"; downgrades caught: {n_down - len(missed)} of {n_down}"
               + (f" (missed: {', '.join(missed)})" if missed else "")
               + (f"; highest legit err/threshold {closest_legit[0]:.3g} ({closest_legit[1]})" if closest_legit else "")
               + (f"; lowest downgrade err/threshold {closest_down[0]:.3g} ({closest_down[1]})" if closest_down else "")
               + (f"; legit kernels not measured (failed before the check): {len(unmeasured)}" if unmeasured else "")
               + (f"; policy cases: {'; '.join(policy)}" if policy else ""))
    lines += ["", summary]
    text = "\n".join(lines)
    print(text)
    if a.out:
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        with open(a.out, "w") as f:
            f.write(text + "\n")
    return 0 if not false_pos and not missed else 1


if __name__ == "__main__":
    sys.exit(main())
