"""Swish, a project-written CPU stand-in for KernelBench level 1 task 25_Swish.

Same function, sized for one CPU thread (about 0.5 ms eager). KernelBench writes
x * torch.sigmoid(x); on a CPU that form is already within ~15% of F.silu, so this
stand-in spells the sigmoid out, which leaves the eager baseline work to fuse.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / (1 + torch.exp(-x))


batch_size = 64
dim = 4096


def get_inputs():
    x = torch.rand(batch_size, dim)
    return [x]


def get_init_inputs():
    return []
