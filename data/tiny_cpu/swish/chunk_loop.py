# @expect: correct
# @design: Python loop over 2048-element chunks of the flattened input, the reference formula on each chunk, then one concatenation.
# @analysis: Each chunk stays in L1, but 128 chunks times four ops means over 500 operator dispatches of a few microseconds each; the dispatch overhead dominates and makes it several times slower than eager.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        chunks = [c / (1 + torch.exp(-c)) for c in x.reshape(-1).split(2048)]
        return torch.cat(chunks).view_as(x)
