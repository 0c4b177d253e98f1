# @expect: correct
# @design: One call to the fused library op F.silu.
# @analysis: The reference runs four elementwise ops (neg, exp, add, divide) with three temporaries; F.silu computes x*sigmoid(x) in one vectorised pass with one output, about 2x faster.
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(x)
