# @expect: correct
# @design: L2 norm over the features with torch.linalg.vector_norm, turned into rms with in-place square, scale, eps and rsqrt on the small tensor, then one multiply.
# @analysis: One library reduction replaces the x**2 temporary and the mean, but vector_norm over a strided dimension is not vectorised on CPU and costs several times eager.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = torch.linalg.vector_norm(x, dim=1, keepdim=True)
        return x * n.square_().div_(x.shape[1]).add_(self.eps).rsqrt_()
