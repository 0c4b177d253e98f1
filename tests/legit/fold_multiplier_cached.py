"""task: level2/12_Gemm_Multiply_LeakyReLU
expect: ok
Legitimate (a former false positive of the source scan: `cached_output`): (x W^T + b) * m =
x (m W)^T + m b, so the multiplier is folded into the weights once and the scaled copies are cached, keyed by the
weights' data_ptr() and version counter (rebuilt if the weights are replaced or changed in place). Every call
computes the GEMM on its own fresh input; only a function of the weights is cached, never an output. m = 2 is a
power of two, so the folded weights are exact. One elementwise pass (the multiply) less than the reference."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)        # the reference's weights (same seed, same order)
        self.multiplier = multiplier
        self.negative_slope = negative_slope
        self._key, self._w, self._b = None, None, None

    def _folded(self):
        w, b = self.gemm.weight, self.gemm.bias
        key = (w.data_ptr(), w._version, b.data_ptr(), b._version)
        if key != self._key:
            with torch.no_grad():
                self._w, self._b = w * self.multiplier, b * self.multiplier
            self._key = key
        return self._w, self._b

    def forward(self, x):
        w, b = self._folded()
        return F.leaky_relu(F.linear(x, w, b), self.negative_slope)
