# Two samples through OpenCompass's OpenAI-compatible API model against a local server.
_base_ = []

from needlebench.opencompass.configs import SUMMARIZER, needlebench_datasets, runtime
from needlebench.opencompass.models import load_models

models = load_models(default="models/api_openai_compatible.py")
datasets = needlebench_datasets(
    suite="4k", tasks=["srt"], langs=["en"], lengths=[1000], depths=[0, 100], repeats=1, max_out_len=24
)
infer, eval = runtime(num_shards=1, eval_workers=1)
summarizer = dict(type=SUMMARIZER)
