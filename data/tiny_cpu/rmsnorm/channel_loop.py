# @expect: correct
# @design: Python loop over the features accumulating the sum of squares one (B, 1, H, W) slice at a time, then one broadcast divide.
# @analysis: No x-sized temporary, but 64 iterations of small strided ops cost more in dispatch overhead than eager spends on the whole reduction; several times slower.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ss = torch.zeros_like(x[:, :1])
        for c in range(x.shape[1]):
            ss += x[:, c:c + 1] * x[:, c:c + 1]
        return x / torch.sqrt(ss / x.shape[1] + self.eps)
