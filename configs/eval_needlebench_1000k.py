# NeedleBench 1000k: S-RT, M-RT and M-RS, English and Chinese (OpenCompass v2 lengths and depths).
#   opencompass configs/eval_needlebench_1000k.py
#   NEEDLEBENCH_MODELS=models/lmdeploy_qwen2_5_7b_instruct_128k.py opencompass configs/eval_needlebench_1000k.py
# Change lengths, depths, repeats, languages or prompt options in the needlebench_datasets(...) call;
# profile="v1" gives the 2024 buffers and 0.4/0.3/0.3 weighting.
_base_ = []  # keeps mmengine in plain-Python mode: without it, calls below fail with a bare RuntimeError()

from needlebench.opencompass.configs import SUMMARIZER, needlebench_datasets, runtime
from needlebench.opencompass.models import load_models

models = load_models(default="models/vllm_qwen2_5_7b_instruct_1m.py")
datasets = needlebench_datasets(suite="1000k")
# 8 shards: one per GPU of a node. An infer task holds one batch of prompts, not its shard (about 0.6 GB of
# its own memory at any shard size; 4.2 GB RSS at most with the dataset pages it maps), measured at the
# default repeats in a 6 GiB memory cgroup: docs/reliability/disk-memory.md, bench/limits_1000k.json.
infer, eval = runtime(num_shards=8)
summarizer = dict(type=SUMMARIZER)
work_dir = "outputs/needlebench_1000k"
