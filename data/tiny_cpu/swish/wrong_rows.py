# @expect: wrong
# @design: Preallocate the output and fill it row by row with F.silu.
# @analysis: F.silu fuses the four elementwise ops of the reference, and writing into a preallocated output avoids the temporaries.
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.zeros_like(x)
        for i in range(x.shape[0] - 1):
            y[i] = F.silu(x[i])
        return y
