# @expect: wrong
# @design: Mean of x.square() over the last dimension, then add eps and rsqrt in place, and one broadcast multiply.
# @analysis: Reducing over the contiguous last dimension vectorises well, and the rsqrt and eps run in place on the small tensor.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ms = x.square().mean(dim=-1, keepdim=True)
        return x * ms.add_(self.eps).rsqrt_()
