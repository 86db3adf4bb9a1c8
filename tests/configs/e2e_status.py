# A run to watch (tests/test_status.py): an API model against the slow scripted server (tools/flaky_server.py
# --latency), two prompts in flight, so that the run lasts long enough to read its status half way.
_base_ = []

import os

from needlebench.opencompass.configs import SUMMARIZER, needlebench_datasets, runtime
from needlebench.opencompass.models import api_model

datasets = needlebench_datasets(
    suite="4k",
    tasks=["srt"],
    lengths=[1000, 2000],
    depths=[0, 25, 50, 75, 100],
    repeats=int(os.environ.get("NEEDLEBENCH_TEST_REPEATS", "3")),
)
models = [
    api_model(
        abbr="slow-api",
        model="flaky",
        # the scripted server names no tokenizer: gpt-4's encoding, which OpenCompass falls back to, named
        # so that each infer task skips the transformers import (~4 s) its fallback costs
        tokenizer_path="gpt-4",
        base_url=os.environ["NEEDLEBENCH_API_BASE"],
        max_seq_len=100000,
        max_out_len=16,
        batch_size=2,
        retry=1,
        timeout=30,
        query_per_second=100,
    ),
]
infer, eval = runtime(num_shards=1, max_workers=1, eval_workers=1)
summarizer = dict(type=SUMMARIZER)
