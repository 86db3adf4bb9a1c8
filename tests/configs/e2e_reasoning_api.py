# Reasoning returned apart (tests/test_reliability.py): API models against the scripted server
# (tools/flaky_server.py --reasoning) that returns reasoning_content apart from the answer, usage.completion_tokens,
# for one prompt in three an empty answer cut off while reasoning, and for one in six a decoy (the gold only in
# the reasoning). One model is set up as a reasoning model (OpenCompass's think strip), one is plain; each
# dataset comes twice: scored by default (the answer alone) and with reasoning_apart="joined" (OpenCompass's text).
_base_ = []

import os

from needlebench.opencompass.configs import SUMMARIZER, needlebench_datasets, runtime
from needlebench.opencompass.models import api_model, reasoning

datasets = needlebench_datasets(suite="4k", tasks=["srt"], lengths=[1000], depths=[0, 50, 100], repeats=2)
for d in needlebench_datasets(
    suite="4k", tasks=["srt"], lengths=[1000], depths=[0, 50, 100], repeats=2, reasoning_apart="joined"
):
    d["abbr"] += "_joined"
    datasets.append(d)
_api = dict(
    model="flaky",
    # the scripted server names no tokenizer: gpt-4's encoding, which OpenCompass falls back to, named
    # so that each infer task skips the transformers import (~4 s) its fallback costs
    tokenizer_path="gpt-4",
    base_url=os.environ["NEEDLEBENCH_API_BASE"],
    max_seq_len=100000,
    batch_size=4,
    query_per_second=50,
    retry_passes=0,
)
models = [
    reasoning(api_model(abbr="api-model", **_api), max_out_len=64),
    api_model(abbr="api-plain", max_out_len=64, **_api),
]
infer, eval = runtime(num_shards=1, max_workers=2, eval_workers=1)
summarizer = dict(type=SUMMARIZER)
