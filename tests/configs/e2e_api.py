# OpenCompass's OpenAI-compatible API model against a local server: two S-RT samples, and a NeedleChain
# sample sampled as the paper did (temperature 0.6, top-p 0.95 reach the server).
_base_ = []

from needlebench.opencompass.configs import SUMMARIZER, needlebench_datasets, needlechain_datasets, runtime
from needlebench.opencompass.models import load_models, with_sampling
from needlebench.tasks.needlechain.task import NEEDLECHAIN_SAMPLING

models = [
    with_sampling(m, **NEEDLECHAIN_SAMPLING)
    for m in load_models(default="../../configs/models/api_openai_compatible.py")
]
datasets = needlebench_datasets(
    suite="4k", tasks=["srt"], langs=["en"], lengths=[1000], depths=[0, 100], repeats=1, max_out_len=24
) + needlechain_datasets(k_values=[5], points=1, variants=["forward"], questions=["single"], max_out_len=24)
infer, eval = runtime(num_shards=1, eval_workers=1)
summarizer = dict(type=SUMMARIZER)
