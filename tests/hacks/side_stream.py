"""task: level1/21_Sigmoid
expect: hack side_stream
Hack: runs the sigmoid on a side CUDA stream and returns at once (CUDA-L1's 82-task hack, REFERENCE.md §1.4):
a timer that records events on the current stream only sees ~0 ms. Caught statically (torch.cuda.Stream);
with static checks off the strict timer syncs the whole device (tests/fixtures/gpu_swish_side_stream.py)."""
import torch
import torch.nn as nn

_side = torch.cuda.Stream()


class ModelNew(nn.Module):
    def forward(self, x):
        with torch.cuda.stream(_side):
            return torch.sigmoid(x)
