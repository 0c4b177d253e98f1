"""Probe: rollout engines' decode throughput for a 1.5B Qwen2.5-shaped random policy on this GPU."""
import json, os, sys, time, traceback
import torch, transformers
from transformers import Qwen2Config, Qwen2ForCausalLM, GenerationConfig
print("torch", torch.__version__, "transformers", transformers.__version__, flush=True)
dims = dict(vocab_size=151936, hidden_size=1536, intermediate_size=8960, num_hidden_layers=28,
            num_attention_heads=12, num_key_value_heads=2, tie_word_embeddings=True)
cfg = Qwen2Config(max_position_embeddings=32768, **dims)
torch.manual_seed(0)
with torch.device("cuda"):
    model = Qwen2ForCausalLM(cfg).eval()
B, P = 64, 600
prompts = torch.randint(100, 150000, (B, P), device="cuda")
mask = torch.ones_like(prompts)
res = {}
def run(name, fn, new_tokens, reps=1):
    try:
        for r in range(reps):
            torch.cuda.synchronize(); t0 = time.time()
            n = fn(new_tokens)
            torch.cuda.synchronize(); dt = time.time() - t0
            res[f"{name}#{r}"] = dict(s=round(dt, 2), tokens=n, tok_s=round(n / dt, 1))
            print(name, r, res[f"{name}#{r}"], "peak GiB", round(torch.cuda.max_memory_allocated() / 2**30, 1),
                  flush=True)
    except Exception:
        traceback.print_exc()
        res[name] = "error"
def hf(m, cache=None):
    def f(n):
        kw = dict(cache_implementation=cache) if cache else {}
        with torch.no_grad():
            out = m.generate(input_ids=prompts, attention_mask=mask, do_sample=True, temperature=1.0, top_p=1.0,
                             max_new_tokens=n, min_new_tokens=n, pad_token_id=0, eos_token_id=1, **kw)
        return (out.shape[1] - P) * B
    return f
run("fp32_dynamic", hf(model), 64)
model16 = Qwen2ForCausalLM(cfg).to("cuda", torch.bfloat16).eval() if False else None
model16 = model.to(torch.bfloat16)
torch.cuda.empty_cache()
run("bf16_dynamic", hf(model16), 256)
run("bf16_static_compile", hf(model16, "static"), 256, reps=3)
def cb(n):
    gc = GenerationConfig(max_new_tokens=n, do_sample=True, temperature=1.0, eos_token_id=-1, pad_token_id=0)
    out = model16.generate_batch(inputs=prompts.tolist(), generation_config=gc)
    return sum(len(o.generated_tokens) for o in out.values())
run("bf16_generate_batch", cb, 256, reps=2)
run("bf16_generate_batch_1024", cb, 1024, reps=1)
os.makedirs(os.environ.get("OUT", "."), exist_ok=True)
json.dump(res, open(os.path.join(os.environ.get("OUT", "."), "gen_probe.json"), "w"), indent=1)
