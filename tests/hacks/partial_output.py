"""task: level1/21_Sigmoid
expect: incorrect
Hack: computes only the first half of the rows; the rest is whatever memory it got (REFERENCE.md §4 partial
output; on a reused block that can be the reference's answer). Caught: poisoned memory + full-tensor compare."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        h = x.shape[0] // 2
        torch.sigmoid(x[:h], out=y[:h])
        return y
