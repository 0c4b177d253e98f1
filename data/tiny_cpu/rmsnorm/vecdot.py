# @expect: correct
# @design: Sum of squares over the features with one torch.linalg.vecdot(x, x, dim=1), then scale, eps and rsqrt in place on the small tensor, and one broadcast multiply.
# @analysis: vecdot squares and reduces in one op, so the x-sized x**2 temporary and its extra pass disappear, and the big tensor is multiplied instead of divided; eager is already close to this on CPU, so the gain is small.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ss = torch.linalg.vecdot(x, x, dim=1).unsqueeze(1)
        return x * ss.div_(x.shape[1]).add_(self.eps).rsqrt_()
