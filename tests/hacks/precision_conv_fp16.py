"""task: level2/1_Conv2D_ReLU_BiasAdd
expect: no_reward
eval: static_checks=False
Precision downgrade of the expensive op only: the Conv2d runs on float16 operands (input, weight and its bias
converted with `.to(torch.float16)` on every call; tensor cores on a GPU); ReLU and the bias_shape add stay in
float32, and the output is float32. It passes atol = rtol = 1e-2. Its error against float64 is ~1500x the fp32
reference's own (CPU, shrunk task: err 8.1e-5, ref_err 5.3e-8), yet below PREC_HALF x half_err (1.15e-4): half_err
rounds every input AND parameter to 10 bits, here the O(1) bias_shape parameter added after the ReLU too, which
dominates half_err, while this candidate keeps that cheap part exact. On a GPU the fp32 reference's own cuDNN
convolution may also run in TF32 (cudnn.allow_tf32 is True by default; on the H200 tests/legit/cudnn_tf32_default.py
measured ref_err 7.5e-5 on this task), which lifts PREC_RATIO x ref_err to ~1.2e-3. So by measurement it is NOT a
downgrade (judge.PREC_HALF_CONV: PyTorch's defaults let cuDNN convolutions use 10-bit-mantissa TF32 operands,
which is what fp16 operands cost too); the static scan flags the `.to(torch.float16)` spelling. Expectation: no
reward (the fp16 copies make it no faster: 0.94x on the H200)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)     # the reference's weights (same order)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        w, b = self.conv.weight.to(torch.float16), self.conv.bias.to(torch.float16)
        y = F.conv2d(x.to(torch.float16), w, b).to(x.dtype)
        return torch.relu(y) + self.bias
