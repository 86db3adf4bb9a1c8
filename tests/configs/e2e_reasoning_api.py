# Reasoning returned apart (tests/test_reliability.py): an API model set up as a reasoning model, against the
# scripted server (tools/flaky_server.py --reasoning) that returns reasoning_content apart from the answer,
# usage.completion_tokens and, for one prompt in three, an empty answer cut off while reasoning.
_base_ = []

import os

from needlebench.opencompass.configs import SUMMARIZER, needlebench_datasets, runtime
from needlebench.opencompass.models import api_model, reasoning

datasets = needlebench_datasets(suite="4k", tasks=["srt"], lengths=[1000], depths=[0, 50, 100], repeats=2)
models = [
    reasoning(
        api_model(
            abbr="api-model",
            model="flaky",
            base_url=os.environ["NEEDLEBENCH_API_BASE"],
            max_seq_len=100000,
            batch_size=4,
            query_per_second=50,
            retry_passes=0,
        ),
        max_out_len=64,
    )
]
infer, eval = runtime(num_shards=1, max_workers=2, eval_workers=1)
summarizer = dict(type=SUMMARIZER)
