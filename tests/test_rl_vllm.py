"""vLLM rollouts (generation.load_vllm / vllm_generate / vllm_sleep / vllm_push_weights), TRL's colocate mode. vLLM is
installed on neither machine this project was developed on, so the GPU test skips and this path has not run on a GPU;
the CPU tests put a stand-in `vllm` module with vLLM's documented API shape in its place: the conversion of vLLM's
outputs (order, EOS, truncation, the sampled tokens' log-probs), the engine's settings, and rl.py's order of calls
around it: generate -> sleep -> time kernels -> train -> wake -> push -> generate."""
import contextlib
import json
import os
import subprocess
import sys
import textwrap
import types

import pytest
import torch

from training import generation

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _tiny_model_dir(path):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.train_from_iterator(["class ModelNew(torch.nn.Module): pass"] * 10, trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, eos_token="<|endoftext|>", pad_token="<|endoftext|>")
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128,
                                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                                         max_position_embeddings=256, eos_token_id=tok.eos_token_id))
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return model, tok


@pytest.mark.gpu
def test_vllm_greedy_matches_transformers_and_follows_weight_pushes(tmp_path):
    if not generation.vllm_available():
        pytest.skip("vLLM not installed")     # the exact reason conftest.ALLOWED_SKIPS lets CI through
    model, tok = _tiny_model_dir(tmp_path / "m")
    model = model.cuda()
    llm = generation.load_vllm(str(tmp_path / "m"), gpu_memory_utilization=0.2, seed=0, dtype="float32")
    greedy = lambda: [r["completion_ids"] for r in generation.vllm_generate(llm, tok, ["class Model"], 1, 6, 0.0)]
    hf = lambda: [r["completion_ids"] for r in generation.generate(model, tok, ["class Model"], 1, 6, 0.0)]
    assert greedy() == hf()
    with torch.no_grad():  # a different policy: vLLM must sample from it after the push (and not from a stale cache)
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    generation.vllm_push_weights(llm, model)
    assert greedy() == hf()


def test_vllm_generate_converts_outputs(monkeypatch):
    # vLLM's documented output shape: RequestOutput.outputs -> CompletionOutput with token_ids, finish_reason,
    # stop_reason and, with SamplingParams(logprobs=0), logprobs: per token {token id: Logprob} of the sampled token
    seen = {}

    class SamplingParams:
        def __init__(self, **kw):
            seen.update(kw)
    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(SamplingParams=SamplingParams))
    logprob = lambda ids: [{i: types.SimpleNamespace(logprob=-0.1 * i, rank=1)} for i in ids]
    C = lambda ids, fin, stop=None: types.SimpleNamespace(token_ids=ids, finish_reason=fin, stop_reason=stop,
                                                          logprobs=logprob(ids))

    class LLM:
        def generate(self, prompts, params, use_tqdm=False):
            return [types.SimpleNamespace(prompt_token_ids=[1, 2], outputs=[C([5, 0], "stop"), C([6, 7], "length")]),
                    types.SimpleNamespace(prompt_token_ids=[3], outputs=[C([8], "stop"), C([9], "stop", "###")])]

    class Tok:
        eos_token_id = 0
        chat_template = None

        def decode(self, ids, skip_special_tokens=True):
            return " ".join(str(i) for i in ids if i != 0)
    out = generation.vllm_generate(LLM(), Tok(), ["p", "q"], 2, 16, temperature=0.7)
    assert seen == dict(n=2, temperature=0.7, top_p=1.0, max_tokens=16, logprobs=0)
    assert [(o["prompt_ids"], o["completion_ids"], o["truncated"]) for o in out] == [
        ([1, 2], [5, 0], False), ([1, 2], [6, 7], True), ([3], [8, 0], False), ([3], [9], False)]
    assert out[0]["text"] == "5"
    # one log-prob per completion token, the sampled token's; the EOS appended here (vLLM left it out) gets 0.0
    assert [o["sampler_logp"] for o in out] == [pytest.approx(x) for x in ([-0.5, 0.0], [-0.6, -0.7], [-0.8, 0.0],
                                                                           [-0.9])]


def test_vllm_sleep_wake_and_push(monkeypatch):
    # sleep frees the engine's memory (level 1); the push wakes it first, once; a second wake or a wake of an engine
    # that never slept calls nothing; generating wakes a sleeping engine
    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(SamplingParams=lambda **kw: kw))
    calls = []

    class Model:
        def load_weights(self, items):
            calls.append(("push", sorted(name for name, _ in items)))

    class LLM:
        llm_engine = types.SimpleNamespace(model_executor=types.SimpleNamespace(driver_worker=types.SimpleNamespace(
            model_runner=types.SimpleNamespace(model=Model()))))
        sleep = lambda self, level: calls.append(("sleep", level))
        wake_up = lambda self: calls.append("wake")
        reset_prefix_cache = lambda self: calls.append("reset_prefix_cache")
        generate = lambda self, prompts, params, use_tqdm=False: calls.append("generate") or []

    llm, policy = LLM(), torch.nn.Linear(2, 1)
    generation.vllm_wake(llm)
    generation.vllm_sleep(llm)
    generation.vllm_push_weights(llm, policy)
    generation.vllm_wake(llm)
    generation.vllm_sleep(llm)
    generation.vllm_generate(llm, types.SimpleNamespace(chat_template=None), ["p"], 1, 4)
    assert calls == [("sleep", 1), "wake", ("push", ["bias", "weight"]), "reset_prefix_cache", ("sleep", 1), "wake",
                     "generate"]


def test_load_vllm_settings(monkeypatch):
    # the engine TRL's colocate mode builds: sleep mode, processed log-probs (temperature and top_p applied, as the
    # trainer's log-probs are), a bounded token budget per engine step; one engine per rank under torchrun
    made = {}
    monkeypatch.setattr(generation, "vllm_available", lambda: True)
    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(LLM=lambda **kw: made.update(kw)))
    monkeypatch.setenv("WORLD_SIZE", "2")
    generation.load_vllm("m", 0.25, seed=3, dtype="bfloat16", max_num_batched_tokens=2048, sleep_mode=True)
    assert made == dict(model="m", gpu_memory_utilization=0.25, seed=3, dtype="bfloat16", enable_prefix_caching=True,
                        max_num_batched_tokens=2048, logprobs_mode="processed_logprobs", enable_sleep_mode=True,
                        distributed_executor_backend="external_launcher")


FAKE_VLLM = textwrap.dedent("""
    # a stand-in for vllm: answers of a few tokens ending with EOS, every call appended to $FAKE_VLLM_EVENTS
    import json, os, types
    from transformers import AutoTokenizer

    def event(name, **kw):
        with open(os.environ["FAKE_VLLM_EVENTS"], "a") as f:
            f.write(json.dumps(dict(event=name, **kw)) + "\\n")

    class SamplingParams:
        def __init__(self, **kw):
            self.kw = kw

    class Runner:
        def load_weights(self, items):
            event("push", tensors=len(list(items)))

    class LLM:
        def __init__(self, model, **kw):
            event("init", **kw)
            self.eos = AutoTokenizer.from_pretrained(model).eos_token_id
            self.llm_engine = types.SimpleNamespace(model_executor=types.SimpleNamespace(
                driver_worker=types.SimpleNamespace(model_runner=types.SimpleNamespace(model=Runner()))))

        def generate(self, prompts, params, use_tqdm=False):
            event("generate", prompts=len(prompts), **params.kw)
            ids = [5, 6, self.eos]
            lp = [{t: types.SimpleNamespace(logprob=-0.25)} for t in ids]
            c = types.SimpleNamespace(token_ids=ids, finish_reason="stop", stop_reason=None, logprobs=lp)
            return [types.SimpleNamespace(prompt_token_ids=[1, 2], outputs=[c] * params.kw["n"]) for _ in prompts]

        def sleep(self, level):
            event("sleep", level=level)

        def wake_up(self):
            event("wake")

        def reset_prefix_cache(self):
            event("reset_prefix_cache")
""")
WRAP = textwrap.dedent("""
    # rl.py as its own __main__, with kernel timing and the optimizer step also written to the events file
    import json, os, runpy, sys, torch
    from training import rollouts

    def event(name):
        with open(os.environ["FAKE_VLLM_EVENTS"], "a") as f:
            f.write(json.dumps(dict(event=name)) + "\\n")

    def timed(evaluate):
        def evaluate_kernels(*args, **kw):
            event("time_kernels")
            return evaluate(*args, **kw)
        return evaluate_kernels

    def stepped(step):
        def optimizer_step(self, *args, **kw):
            event("train")
            return step(self, *args, **kw)
        return optimizer_step
    rollouts.evaluate_kernels = timed(rollouts.evaluate_kernels)
    torch.optim.AdamW.step = stepped(torch.optim.AdamW.step)
    sys.argv = [sys.argv[1]] + sys.argv[2:]
    runpy.run_path(sys.argv[0], run_name="__main__")
""")


@pytest.mark.parametrize("async_rollouts", [False, True])
def test_rl_colocate_call_order(tmp_path, async_rollouts):
    """rl.py --use_vllm=True with the stand-in: the engine sleeps right after generating, through kernel timing and
    training, and wakes before the weight push of every step (async_rollouts: the next batch, generated during the
    step, sleeps the engine again before the kernels are timed)."""
    (tmp_path / "vllm").mkdir()
    (tmp_path / "vllm" / "__init__.py").write_text(FAKE_VLLM)
    (tmp_path / "wrap.py").write_text(WRAP)
    _tiny_model_dir(tmp_path / "policy")
    run = tmp_path / "run"
    run.mkdir()
    src = open(os.path.join(ROOT, "data", "tiny_cpu", "tasks", "swish.py")).read()
    (run / "tasks.jsonl").write_text(json.dumps(dict(name="tasks/swish", level=0, src=src, split="train")) + "\n")
    events = tmp_path / "events.jsonl"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), ROOT]), FAKE_VLLM_EVENTS=str(events),
               OMP_NUM_THREADS="1", CUDAL1_BUILD_ROOT=str(tmp_path / "build"))
    p = subprocess.run([sys.executable, str(tmp_path / "wrap.py"), os.path.join(ROOT, "rl.py"), "--gpu=cpu",
                        f"--out_dir={run}", f"--policy={tmp_path / 'policy'}", "--use_vllm=True", "--max_steps=2",
                        "--num_prompts=1", "--num_generations=2", "--max_completion_length=8", "--micro_batch_size=2",
                        f"--async_rollouts={async_rollouts}", "--build_workers=1"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, (p.stdout[-3000:], p.stderr[-3000:])
    log = [json.loads(line) for line in open(events)]
    init = log[0]
    assert init["event"] == "init" and init["enable_sleep_mode"] is True and init["max_num_batched_tokens"] == 4096
    assert init["logprobs_mode"] == "processed_logprobs"
    assert all(e["logprobs"] == 0 for e in log if e["event"] == "generate")
    order = [e["event"] for e in log[1:] if e["event"] != "reset_prefix_cache"]
    step = ["time_kernels", "train", "wake", "push"]
    if async_rollouts:  # step 0's batch, then each step's next batch generated while its kernels compile (at step 0
        #                 the engine sleeps between the two batches; at step 1 the push of step 0 has woken it)
        expect = ["generate", "sleep", "wake", "generate", "sleep"] + step + ["generate", "sleep"] + step
    else:
        expect = (["generate", "sleep"] + step) * 2
    assert order == expect, order
    assert [e["level"] for e in log if e["event"] == "sleep"] == [1] * order.count("sleep")


def test_cached_gpu_memory_released_before_kernels_are_timed(monkeypatch):
    # the policy's cached blocks go back to the GPU before bench's processes time kernels there; with no kernels to
    # time nothing is called, and without CUDA initialised (the CPU) neither
    import bench
    from training import rollouts
    calls = []
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append("empty_cache"))
    monkeypatch.setattr(bench, "evaluate_many", lambda jobs, **kw: calls.append("time") or [dict(status="ok")] * len(
        jobs))
    scope = contextlib.nullcontext
    assert rollouts.evaluate_kernels({}, scope) == {} and calls == []
    assert rollouts.evaluate_kernels({"k": ("t", "src", "code")}, scope, device="cuda") == {"k": {"status": "ok"}}
    assert calls == ["empty_cache", "time"]
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    rollouts.evaluate_kernels({"k": ("t", "src", "code")}, scope, device="cpu")
    assert calls == ["empty_cache", "time", "time"]
