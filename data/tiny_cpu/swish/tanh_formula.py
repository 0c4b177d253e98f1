# @expect: correct
# @design: Sigmoid through tanh, x * (0.5 * tanh(0.5 * x) + 0.5), as five tensor ops.
# @analysis: Five elementwise passes instead of four, and the vectorised tanh costs several times an exp, so it is about 3x slower than eager.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * (0.5 * torch.tanh(0.5 * x) + 0.5)
