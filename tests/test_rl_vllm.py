"""vLLM rollouts (generation.load_vllm / vllm_generate / vllm_push_weights) on a GPU: skipped unless vLLM is installed
(it is installed on neither machine this project was developed on, so this path has not been run)."""
import pytest
import torch

from training import generation


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
    return model.cuda(), tok


@pytest.mark.gpu
def test_vllm_greedy_matches_transformers_and_follows_weight_pushes(tmp_path):
    if not generation.vllm_available():
        pytest.skip("vLLM not installed")     # the exact reason conftest.ALLOWED_SKIPS lets CI through
    model, tok = _tiny_model_dir(tmp_path / "m")
    llm = generation.load_vllm(str(tmp_path / "m"), gpu_memory_utilization=0.2, seed=0, dtype="float32")
    greedy = lambda: [r["completion_ids"] for r in generation.vllm_generate(llm, tok, ["class Model"], 1, 6, 0.0)]
    hf = lambda: [r["completion_ids"] for r in generation.generate(model, tok, ["class Model"], 1, 6, 0.0)]
    assert greedy() == hf()
    with torch.no_grad():  # a different policy: vLLM must sample from it after the push (and not from a stale cache)
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    generation.vllm_push_weights(llm, model)
    assert greedy() == hf()
