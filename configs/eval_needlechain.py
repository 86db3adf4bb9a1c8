# NeedleChain: forward / backward / mixed chains and NeedleStack, single and total questions.
#   opencompass configs/eval_needlechain.py                 (full: k = 5..200, 200 data points)
#   NEEDLECHAIN_QUICK=1 opencompass configs/eval_needlechain.py   (quick: k = 5, 10, 20, 10 points)
# The paper sampled at temperature 0.6, top-p 0.95: that lives here, not in code.
_base_ = []  # keeps mmengine in plain-Python mode: without it, calls below fail with a bare RuntimeError()

import os

from needlebench.opencompass.configs import SUMMARIZER, needlechain_datasets, runtime
from needlebench.opencompass.models import load_models, with_sampling
from needlebench.tasks.needlechain.task import NEEDLECHAIN_SAMPLING

models = [
    with_sampling(m, **NEEDLECHAIN_SAMPLING) for m in load_models(default="models/vllm_qwen2_5_7b_instruct_128k.py")
]
datasets = needlechain_datasets(quick=bool(os.environ.get("NEEDLECHAIN_QUICK")))
infer, eval = runtime(num_shards=4)
summarizer = dict(type=SUMMARIZER)
work_dir = "outputs/needlechain"
