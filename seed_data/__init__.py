"""Where prepare.py's seed kernels (seed.jsonl, db.json) and SFT rows (sft.jsonl) come from: project-written kernels
(variants.py), teacher LLMs (teachers.py, CUDA-L1's stage 1, REFERENCE.md §1.1) and kernel files (imports.py).
Every kernel is verified by bench.py on this machine's device before it is kept."""
