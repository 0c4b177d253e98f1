"""prepare.py's import of the CUDA-L1 release format: field parsing and matching to KernelBench task names (CPU),
and re-verification of the seven released kernels on the GPU."""
import json
import os
import subprocess
import sys

import pytest

import common
from evaluation import taskset
from seed_data import imports

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE = os.path.join(os.environ.get("CUDAL1_SAMPLE_DIR") or os.path.join(ROOT, "..", "shared", "cudal1_sample"),
                      "a100_sample.jsonl")
KB = os.environ.get("KERNELBENCH_DIR") or os.path.join(ROOT, "..", "shared", "kernelbench")
needs_data = pytest.mark.skipif(not (os.path.exists(SAMPLE) and os.path.isdir(KB)),
                                reason="needs the CUDA-L1 sample (CUDAL1_SAMPLE_DIR) and KernelBench")


@needs_data
def test_cudal1_rows_match_kernelbench_tasks():
    tasks = taskset.load_tasks(KB, [1, 2], [])
    items = imports.read_import(SAMPLE, tasks)
    lines = [json.loads(x) for x in open(SAMPLE)]
    assert len(items) == len(lines) == 7
    for (name, code, src), line in zip(items, lines):
        # level_id / task_id -> the task set's own name ("level1/5_Matrix_scalar_multiplication")
        assert name.startswith(f"level{line['level_id']}/{line['task_id']}_"), name
        assert code == line["custom_code"] and "class ModelNew" in code and src == "import:a100_sample.jsonl"


def test_bad_import_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "x.jsonl"
    bad.write_text('{"foo": 1}\n')
    p = subprocess.run([sys.executable, "prepare.py", f"--kernelbench_dir={ROOT}/data/tiny_cpu/tasks", "--levels=0",
                        "--device=cpu", f"--out_dir={tmp_path}", f"--import_kernels={bad}"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 1 and "neither {'task', 'code'} nor a CUDA-L1 line" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr
    p = subprocess.run([sys.executable, "prepare.py", f"--kernelbench_dir={ROOT}/data/tiny_cpu/tasks", "--levels=0",
                        "--device=cpu", f"--out_dir={tmp_path}", f"--import_kernels={tmp_path}/none.jsonl"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 1 and "does not exist" in p.stderr


@pytest.mark.gpu
@needs_data
def test_cudal1_import_reverified_on_gpu(tmp_path):
    """The 7 released A100 kernels, re-verified against this KernelBench snapshot on this GPU (tasks 1, 5, 12, 25,
    32, 88 of level 1 and 48 of level 2, all in the train split with split=paper)."""
    names = ("level1/1_Square_matrix_multiplication_,level1/5_Matrix_scalar_multiplication,"
             "level1/12_Matmul_with_diagonal_matrices_,level1/25_Swish,level1/32_HardTanh,"
             "level1/88_MinGPTNewGelu,level2/48_Conv3d_Scaling_Tanh_Multiply_Sigmoid")
    p = subprocess.run([sys.executable, "prepare.py", f"--kernelbench_dir={KB}", "--levels=1,2", "--split=paper",
                        f"--task_names={names}", f"--out_dir={tmp_path}", f"--import_kernels={SAMPLE}",
                        "--screen_degenerate=False", "--num_correct_trials=3", "--time_budget_s=0.5"],
                       cwd=ROOT, capture_output=True, text=True, timeout=1200)
    print(p.stdout[-5000:], p.stderr[-3000:])
    assert p.returncode == 0, p.stderr[-3000:]
    rep = common.read_jsonl(tmp_path / "import_report.jsonl")
    assert len(rep) == 7 and all(r["status"] for r in rep)
    ok = {r["task"] for r in rep if r["status"] == "ok"}
    seeds = common.read_jsonl(tmp_path / "seed.jsonl") if ok else []
    assert {s["task"] for s in seeds} == ok and all(s["result"]["device"] == "cuda" for s in seeds)
