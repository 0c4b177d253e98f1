# @expect: correct
# @design: Python loop over the rows, the reference formula on each row, then one stack.
# @analysis: Each row stays in cache, but 64 rows times eight ops is about 500 operator dispatches on top of the same arithmetic, so it is slower than eager.
import math

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        k = math.sqrt(2.0 / math.pi)
        rows = [0.5 * r * (1.0 + torch.tanh(k * (r + 0.044715 * torch.pow(r, 3.0)))) for r in x]
        return torch.stack(rows)
