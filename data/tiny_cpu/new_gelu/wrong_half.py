# @expect: wrong
# @design: One call to F.gelu(x, approximate="tanh") scaled to match the reference.
# @analysis: One vectorised pass instead of eight elementwise ops and their temporaries.
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 2.0 * F.gelu(x, approximate="tanh")
