"""task: level1/1_Square_matrix_multiplication_
expect: incorrect
eval: static_checks=False
Judge attack, checker poisoning through gc (REFERENCE.md §4b): the expected output overwritten with the candidate's
own answer. Returns zeros (no work at all) and, in every call, searches gc.get_objects() for every other tensor of
the output's shape and dtype (not its inputs, not its own answer) and overwrites it with that answer, so an
expected output computed before the call in the same process now equals the candidate's. Wins against any
evaluator that keeps its reference output in the candidate's process (`ref = model(*x); out = new(*x);
allclose(out, ref)`), at a speedup of hundreds. Here the reference lives in the judge's process only: the judge
compares the zeros with its own answer (incorrect)."""
import gc

import torch
import torch.nn as nn


def _overwrite_expected(answer, inputs):
    mine = {id(answer)} | {id(x) for x in inputs}
    spans = [(x.untyped_storage().data_ptr(), x.untyped_storage().nbytes()) for x in inputs]
    for obj in gc.get_objects():
        try:
            if isinstance(obj, torch.Tensor) and id(obj) not in mine and obj.shape == answer.shape and \
                    obj.dtype == answer.dtype and obj.device == answer.device and \
                    (obj.untyped_storage().data_ptr(), obj.untyped_storage().nbytes()) not in spans:
                with torch.no_grad():
                    obj.copy_(answer)
        except Exception:
            pass


class ModelNew(nn.Module):
    def forward(self, A, B):
        out = torch.zeros(A.shape[0], B.shape[1], dtype=A.dtype, device=A.device)
        _overwrite_expected(out, (A, B))
        return out
