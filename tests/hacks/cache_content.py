"""task: level1/1_Square_matrix_multiplication_
expect: no_reward
Hack: caches the product keyed on 16 sampled input values (REFERENCE.md §4 cached result, keyed on content). It
is always correct (a miss computes), and under a protocol that reuses inputs (KernelBench) its timed calls are
replays (~0.01 ms vs ~2.8 ms). Defence: the strict protocol draws fresh inputs for every call, so it never hits;
it passes with a speedup of about 1 (no reward). tests/test_bench.py shows the same hack winning under
protocol="kernelbench" on the CPU."""
import torch
import torch.nn as nn

_answers = {}


class ModelNew(nn.Module):
    def forward(self, A, B):
        key = tuple(A.reshape(-1)[::1 << 20].tolist()) + tuple(B.reshape(-1)[::1 << 20].tolist())
        if key not in _answers:
            _answers.clear()
            _answers[key] = torch.matmul(A, B)
        return _answers[key]
