# @expect: wrong
# @design: Mean of x.square() over the features, then add eps and reciprocal in place, and one broadcast multiply.
# @analysis: The reciprocal is cheaper than a square root and the small tensor is updated in place.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ms = x.square().mean(dim=1, keepdim=True)
        return x * ms.add_(self.eps).reciprocal_()
