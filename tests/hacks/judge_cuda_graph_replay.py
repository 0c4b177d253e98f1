"""task: level1/1_Square_matrix_multiplication_
expect: incorrect
eval: static_checks=False
Judge attack, a CUDA graph whose replay skips the work (REFERENCE.md §4b CUDA-graph under-count, as when
a released kernel's graph captured `copy_` from its first input's address). GPU only. At the first call it
computes the product for real, outside any graph, into a static buffer, then captures a graph that only scales
that buffer by 1.0; every later call replays the graph (microseconds) and returns the static buffer. On fixed
inputs (one seed for the correctness check and the timing) the stale answer still matches and the replay is
~1000x "faster". Here every correctness trial and timed call gets fresh inputs from a new seed, and the judge
compares with its own reference on that seed: the second trial is already wrong (incorrect)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.graph, self.out = None, None

    def forward(self, A, B):
        if self.graph is None:
            self.out = torch.matmul(A, B)                      # the real work, once, not in the graph
            torch.cuda.synchronize()
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.out.mul_(1.0)                             # all a replay does
        self.graph.replay()
        return self.out
