"""task: level1/86_conv_depthwise_separable_2D
expect: ok
Legitimate (a former false positive of the parent's clock: CUDA-L1 A100 level1/86 read as a
clock_mismatch). The same two convolutions run in channels_last (NHWC) memory format, so the answer (16 x 128 x
512 x 512, 2.1 GB) is a dense tensor that is not contiguous. The runner used to make a .contiguous() copy of it for
the judge inside the parent's wall window, ~1 ms a call the reference's contiguous answer never paid; it now copies
the bytes as stored and the judge permutes them back (exchange.dense_order, judge.as_stored)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, bias=False):
        super().__init__()
        self.depthwise = nn.Conv2d(in_channels, in_channels, kernel_size, stride=stride, padding=padding,
                                   dilation=dilation, groups=in_channels, bias=bias)
        self.pointwise = nn.Conv2d(in_channels, out_channels, kernel_size=1, bias=bias)
        self.to(memory_format=torch.channels_last)

    def forward(self, x):
        x = x.contiguous(memory_format=torch.channels_last)
        return self.pointwise(self.depthwise(x))     # channels_last in, channels_last out
