# @expect: wrong
# @design: One call to the fused library op torch.sigmoid.
# @analysis: The reference runs four elementwise ops with three temporaries; a single vectorised library op does the whole computation in one pass.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(x)
