"""task: level1/21_Sigmoid
expect: hack l2_persistence
Hack: pins its input in L2 with a stream access-policy window (an idea from llm.c) so a timing loop's L2 flush does
not evict it. Caught statically (accessPolicyWindow); at run time the strict clock resets persisting L2 lines
and the set-aside before every timed call (kernel_eval.l2_flush)."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SRC = r"""
#include <cuda_runtime.h>
#include <c10/cuda/CUDAStream.h>
void pin(torch::Tensor x) {
    cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 32 << 20);
    cudaStreamAttrValue attr = {};
    attr.accessPolicyWindow.base_ptr = x.data_ptr();
    attr.accessPolicyWindow.num_bytes = 32 << 20;
    attr.accessPolicyWindow.hitRatio = 1.0f;
    attr.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
    attr.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
    cudaStreamSetAttribute(c10::cuda::getCurrentCUDAStream().stream(), cudaStreamAttributeAccessPolicyWindow, &attr);
}
"""
ext = load_inline(name="hack_l2_pin", cpp_sources=CPP_SRC, functions=["pin"], with_cuda=True)


class ModelNew(nn.Module):
    def forward(self, x):
        ext.pin(x)
        return torch.sigmoid(x)
