"""task: level1/1_Square_matrix_multiplication_
expect: ok
Legitimate (a former false positive of the source scan: `allow_tf32 = False` was read as a TF32
hack). Pins the fp32 matmul to full precision whatever the caller's process was set to: TF32 off for cuBLAS and
the float32 matmul precision "highest" (both PyTorch's defaults, so the backend flags do not change), then the
product. Setting that keeps or raises precision is not a precision downgrade (REFERENCE.md §4c)."""
import torch
import torch.nn as nn

torch.backends.cuda.matmul.allow_tf32 = False
torch.set_float32_matmul_precision("highest")


class ModelNew(nn.Module):
    def forward(self, A, B):
        return torch.mm(A, B)
