# The Ancestral Trace Challenge: needle counts 2..512, four question types, English and Chinese.
#   opencompass configs/eval_atc.py
_base_ = []  # keeps mmengine in plain-Python mode: without it, calls below fail with a bare RuntimeError()

from needlebench.opencompass.configs import SUMMARIZER, atc_datasets, runtime
from needlebench.opencompass.models import load_models

models = load_models(default="models/vllm_qwen2_5_7b_instruct_128k.py")
datasets = atc_datasets(needle_counts=[2, 4, 8, 16, 32, 64, 128, 256, 512], repeats=10)
infer, eval = runtime(num_shards=8)
summarizer = dict(type=SUMMARIZER)
work_dir = "outputs/needlebench_atc"
