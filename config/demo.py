# The demo on any machine: python rl.py --preset=demo
# config/tiny.py (the GPU demo: 4 KernelBench level-1 tasks, CUDA kernels, about 7 min on one GPU) where torch sees a
# CUDA GPU, else config/tiny_cpu.py (the CPU demo: 3 project-written CPU tasks, about 2 min on 2 idle cores). Every
# stage the chain runs gets --preset=demo and makes the same choice; rl.py says which one it made.
import os as _os
import torch as _torch
_demo = "tiny" if _torch.cuda.is_available() else "tiny_cpu"
exec(open(_os.path.join(common.ROOT, "config", _demo + ".py")).read())
if _stage == "rl":  # printed by common.configure once the command line's settings are accepted
    _announce = (f"demo: CUDA GPU {_torch.cuda.get_device_name(0)} visible: the GPU demo (config/tiny.py, about 7 min "
                 "on an H200)" if _demo == "tiny" else f"demo: no CUDA GPU visible to torch {_torch.__version__}: the "
                 "CPU demo (config/tiny_cpu.py, about 2 min on 2 idle cores)")
