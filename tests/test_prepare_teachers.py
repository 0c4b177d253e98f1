"""prepare.py's teacher data generation against a local OpenAI-compatible server (http.server in a thread), the
import of kernel files, resumption, and a clear error when the endpoint is down. Real subprocesses, real bench.py
verification of the CPU kernels in data/tiny_cpu."""
import json
import os
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import common

import prompting

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CPU = os.path.join(ROOT, "data", "tiny_cpu")


def kernel(rel):
    return prompting.parse_variant(open(os.path.join(CPU, rel)).read())[0]


def answer(code):
    return prompting.format_response("The reference does four passes.", "One fused op.", code)


class Endpoint:
    """Chat-completions server. Model "good": Swish answers cycle correct (silu), wrong (wrong_math), correct
    (exp_formula), wrong (wrong_rows); NewGELU answers break the format. Model "bad": always wrong_rows / format."""

    def __init__(self):
        self.requests, self.lock, self.count = [], threading.Lock(), {}
        outer = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                assert self.path == "/v1/chat/completions", self.path
                prompt = body["messages"][0]["content"]
                with outer.lock:
                    outer.requests.append((body["model"], self.headers.get("Authorization")))
                    key = (body["model"], "swish" if "torch.exp(-x)" in prompt else "gelu")
                    i = outer.count.get(key, 0)  # requests so far for this (model, task)
                    outer.count[key] = i + 1
                if key[1] == "gelu":
                    text = "I would use a tanh approximation, here is the idea without code."
                elif key[0] == "good":
                    text = "Thinking...\n" + answer(kernel(["swish/silu.py", "swish/wrong_math.py",
                                                            "swish/exp_formula.py", "swish/wrong_rows.py"][i % 4]))
                else:
                    text = answer(kernel("swish/wrong_rows.py"))
                out = json.dumps({"choices": [{"message": {"role": "assistant", "content": text}}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def endpoint():
    e = Endpoint()
    yield e
    e.server.shutdown()


def run_prepare(out, env_extra, *extra):
    env = dict(os.environ, CUDAL1_BUILD_ROOT=str(out / "build"), PYTHONUNBUFFERED="1", **env_extra)
    return subprocess.run([sys.executable, "prepare.py", f"--kernelbench_dir={CPU}/tasks", "--levels=0",
                           "--task_names=tasks/swish,tasks/new_gelu", "--split=paper", "--device=cpu", "--arch=",
                           "--gpu_name=CPU", "--num_correct_trials=2", "--time_budget_s=0.1", "--timeout_s=120",
                           "--build_workers=2", f"--out_dir={out}", *extra],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)


def test_teachers_and_import(endpoint, tmp_path):
    out = tmp_path / "run"
    # kernels to import: rl.py's db.json format (a correct and a wrong Swish) and {task, code} lines (a GELU)
    db = tmp_path / "db.json"
    db.write_text(json.dumps({"tasks/swish": [dict(code=kernel("swish/tanh_formula.py"), speedup=1.2),
                                              dict(code=kernel("swish/wrong_math.py"), speedup=3.0)]}))
    res = tmp_path / "results.jsonl"
    res.write_text(json.dumps(dict(task="tasks/new_gelu", code=kernel("new_gelu/gelu_tanh.py"))) + "\n"
                   + json.dumps(dict(task="tasks/no_such_task", code="class ModelNew: pass\n")) + "\n")
    env = dict(OPENAI_BASE_URL=endpoint.url, OPENAI_API_KEY="sk-test")
    args = ["--teachers=openai:good,openai:bad", "--teacher_tries=4", "--teacher_batch=2", "--teacher_keep=1",
            f"--import_kernels={db},{res}"]
    p = run_prepare(out, env, *args)
    print(p.stdout[-4000:], p.stderr[-3000:])
    assert p.returncode == 0, p.stderr[-3000:]
    assert endpoint.requests[0] == ("good", "Bearer sk-test")
    # good: Swish batch 1 = tries 0, 1 -> silu (ok) + wrong_math; keep=1 reached -> no batch 2; GELU 4 format errors
    # bad: Swish 4 x wrong_rows, GELU 4 format errors
    assert sorted(endpoint.count.items()) == [(("bad", "gelu"), 4), (("bad", "swish"), 4), (("good", "gelu"), 4),
                                              (("good", "swish"), 2)]
    kept = common.read_jsonl(out / "teacher" / "sft.jsonl")
    assert [(k["teacher"], k["task"]) for k in kept] == [("openai:good", "tasks/swish")]
    assert kept[0]["code"] == kernel("swish/silu.py") and kept[0]["speedup"] > 0
    assert kept[0]["response"].startswith("## Performance Analysis")  # the "Thinking..." preamble is dropped
    assert kept[0]["prompt"] == prompting.stage1_prompt(open(f"{CPU}/tasks/swish.py").read(), "CPU")
    att = common.read_jsonl(out / "teacher" / "attempts.jsonl")
    assert len(att) == 2 + 4 + 4 + 4 and len({(a["teacher"], a["task"], a["try"]) for a in att}) == len(att)
    st = {}
    for a in att:
        st.setdefault((a["teacher"], a["task"]), []).append(a["status"])
    st = {k: sorted(v) for k, v in st.items()}
    assert st[("openai:good", "tasks/swish")] == ["incorrect", "ok"]
    assert st[("openai:bad", "tasks/swish")] == ["incorrect"] * 4
    assert st[("openai:good", "tasks/new_gelu")] == ["format_error"] * 4
    summ = {(s["teacher"], s["level"]): s for s in json.load(open(out / "teacher" / "summary.json"))}
    assert summ[("openai:good", "all")]["tries"] == 6 and summ[("openai:good", "all")]["ok"] == 1
    assert summ[("openai:good", "all")]["success_rate"] == pytest.approx(1 / 6)
    assert summ[("openai:good", 0)]["tasks_kept"] == 1 and summ[("openai:bad", "all")]["success_rate"] == 0.0
    assert "openai:good | all | 6 | 1 | 0.167 | 1/2 | 1" in p.stdout
    # imports: the correct ones verified and kept, the wrong one and the unknown task not
    rep = common.read_jsonl(out / "import_report.jsonl")
    assert sorted((r["task"], r["status"]) for r in rep) == [("tasks/new_gelu", "ok"), ("tasks/swish", "incorrect"),
                                                            ("tasks/swish", "ok")]
    seeds = common.read_jsonl(out / "seed.jsonl")
    assert sorted((s["task"], s["source"]) for s in seeds) == [
        ("tasks/new_gelu", "import:results.jsonl"), ("tasks/swish", "import:db.json"),
        ("tasks/swish", "teacher:openai:good")]
    assert all(s["result"]["status"] == "ok" for s in seeds)
    dbo = json.load(open(out / "db.json"))
    assert sorted(e["code"] for e in dbo["tasks/swish"]) == sorted([kernel("swish/silu.py"),
                                                                   kernel("swish/tanh_formula.py")])
    sft = common.read_jsonl(out / "sft.jsonl")
    assert len(sft) == 3 and all(prompting.extract_code(r["response"])[0] for r in sft)

    # a rerun asks the teachers nothing and keeps the same rows
    n_req = len(endpoint.requests)
    p = run_prepare(out, env, *args)
    assert p.returncode == 0, p.stderr[-3000:]
    assert len(endpoint.requests) == n_req
    assert common.read_jsonl(out / "teacher" / "sft.jsonl") == kept
    assert len(common.read_jsonl(out / "teacher" / "attempts.jsonl")) == len(att)


def test_endpoint_down_is_a_clear_error(tmp_path):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = run_prepare(tmp_path, dict(OPENAI_BASE_URL=f"http://127.0.0.1:{port}/v1"), "--teachers=openai:m",
                    "--teacher_retries=1", "--teacher_tries=1")
    assert p.returncode == 1
    assert f"error: teacher openai:m at http://127.0.0.1:{port}/v1/chat/completions: URLError" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr
    p = run_prepare(tmp_path, {}, "--teachers=nonsense")
    assert p.returncode == 1 and "expected hf:<model name or path> or openai:<model>" in p.stderr
    assert "Traceback" not in p.stderr
    p = run_prepare(tmp_path, {}, "--teachers=hf:/no/such/model")
    assert p.returncode == 1 and "model folder '/no/such/model' does not exist" in p.stderr
    assert "Traceback" not in p.stderr
