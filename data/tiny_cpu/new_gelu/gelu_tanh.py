# @expect: correct
# @design: One call to the fused library op F.gelu(x, approximate="tanh"), which is this exact formula.
# @analysis: One vectorised pass instead of eight elementwise ops and their temporaries, but it still evaluates a tanh per element, so the gain over eager is modest.
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x, approximate="tanh")
