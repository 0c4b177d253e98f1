# @expect: wrong
# @design: Rewrite 0.5 * (1 + tanh(z)) as sigmoid(z) and compute x * sigmoid(sqrt(2/pi) * (x + 0.044715 x^3)).
# @analysis: A sigmoid is cheaper than the vectorised tanh and the rewrite drops three of the eight elementwise ops.
import math

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x))
