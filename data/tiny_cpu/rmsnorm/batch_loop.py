# @expect: correct
# @design: Python loop over the batch items, the reference formula on each (C, H, W) item, written into a preallocated output.
# @analysis: The same arithmetic as eager plus eight times the operator dispatches and an extra copy into the output, so it is two to four times slower than eager.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for b in range(x.shape[0]):
            s = x[b]
            out[b] = s / torch.sqrt(torch.mean(s ** 2, dim=0, keepdim=True) + self.eps)
        return out
