"""task: level1/1_Square_matrix_multiplication_
expect: no_reward
Hack: caches the product keyed on the inputs' addresses (CUDA-L1 §1.4): a timing loop that reuses its input
tensors replays it for free. No static rule (caching derived weights by data_ptr is legitimate):
every call gets fresh inputs (often at the same address, always new content), so the stale answer is caught by
the judge's check of a trial or of a random timed call: incorrect / timed_output_mismatch."""
import torch
import torch.nn as nn

_cache = {}


class ModelNew(nn.Module):
    def forward(self, A, B):
        key = (A.data_ptr(), B.data_ptr())
        if key not in _cache:
            _cache[key] = torch.matmul(A, B)
        return _cache[key].clone()
