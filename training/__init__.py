"""What the training stages (sft.py, rl.py) use besides the loop itself, one module per concern: models (loading,
log-probs), generation (transformers, vLLM), ddp (data parallelism), exemplars (the exemplar database), rollouts
(behaviour log-probs, kernel evaluation), checkpoint (rl.py's save and resume), rl_log (rl.py's logs),
self_train (sft.py's stage 2) and stages (the chained stages around rl.py)."""
