# Does CUDA-L1's level1/5 kernel build with torch's own load_inline (no bench)? Prints the end of the error.
import json, os, tempfile, time
from torch.utils.cpp_extension import load_inline
d = next(json.loads(l) for l in open(os.environ["CUDAL1_SAMPLE_DIR"] + "/a100_sample.jsonl")
         if json.loads(l)["level_id"] == 1 and json.loads(l)["task_id"] == 5)
src = d["custom_code"].split("cuda_source = '''")[1].split("'''")[0]
t0 = time.time()
try:
    load_inline(name="plain_l1_5", cpp_sources="", cuda_sources=src, functions=["matrix_scalar_mul"], with_cuda=True,
                build_directory=tempfile.mkdtemp())
    print("BUILT", time.time() - t0)
except Exception as e:
    print("FAILED after", round(time.time() - t0, 1), "s:", type(e).__name__, str(e)[-1500:])
