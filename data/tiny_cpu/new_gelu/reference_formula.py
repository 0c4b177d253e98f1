# @expect: correct
# @design: The reference formula, 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))), as eight tensor ops.
# @analysis: Exactly the eager work: eight elementwise passes with their temporaries, so no speedup.
import math

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))
