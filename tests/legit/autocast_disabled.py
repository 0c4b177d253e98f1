"""task: level2/12_Gemm_Multiply_LeakyReLU
expect: ok
Legitimate (a former false positive of the source scan: `autocast(enabled=False)` was read as
autocast). The GEMM runs inside `torch.autocast("cuda", enabled=False)`, which guarantees float32 even if the
caller had autocast on: it raises precision, never lowers it (REFERENCE.md §4c). The multiply and LeakyReLU are
done in place on the GEMM's output."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)        # the reference's weights (same seed, same order)
        self.multiplier = multiplier
        self.negative_slope = negative_slope

    def forward(self, x):
        with torch.autocast("cuda", enabled=False):
            y = F.linear(x, self.gemm.weight, self.gemm.bias)
        return F.leaky_relu_(y.mul_(self.multiplier), self.negative_slope)
