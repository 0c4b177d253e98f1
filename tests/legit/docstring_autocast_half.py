"""task: level1/88_MinGPTNewGelu
expect: ok
Legitimate (a former false positive of the source scan: the words in this docstring). No
autocast, no .half(), no bfloat16: float32 throughout (a float16 GELU would be a precision downgrade). MinGPT's
GELU is 0.5 x (1 + tanh(u)) with u = sqrt(2/pi) (x + 0.044715 x^3), and 0.5 (1 + tanh(u)) = sigmoid(2u), so the
output is x * sigmoid(2u): 2u by an in-place chain on x^2, then one sigmoid and one product; fewer
elementwise passes and temporaries than the reference's tanh, pow, adds and products. sigmoid(2u) is also more
accurate than 0.5 (1 + tanh(u)) where tanh(u) is close to -1."""
import math

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        c = 2.0 * math.sqrt(2.0 / math.pi)
        u2 = (x * x).mul_(c * 0.044715).add_(c).mul_(x)      # 2u = 2c (x + 0.044715 x^3), in place
        return u2.sigmoid_().mul_(x)                         # x * sigmoid(2u)
