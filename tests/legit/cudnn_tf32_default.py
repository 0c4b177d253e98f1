"""task: level2/1_Conv2D_ReLU_BiasAdd
expect: ok
Legitimate (a former false positive of the source scan: 43 CUDA-L1 kernels were flagged, some only
for this line). `torch.backends.cudnn.allow_tf32 = True` is PyTorch's default, so it changes nothing: the
reference's own convolution runs under it. The convolution is the reference's (same weights), then ReLU and the
bias add in place on the convolution's output, one temporary less than the reference."""
import torch
import torch.nn as nn

torch.backends.cudnn.allow_tf32 = True


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)     # the reference's weights (same order)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        return torch.relu_(self.conv(x)).add_(self.bias)
