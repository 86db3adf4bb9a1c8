# Thinking budgets as an axis (tests/test_thinking_budget.py): one API model asked for 8 and for 30 reasoning
# tokens (thinking_sweep) against the scripted server (tools/flaky_server.py --thinking honour|ignore|reject).
_base_ = []

import os

from needlebench.opencompass.configs import SUMMARIZER, needlebench_datasets, runtime
from needlebench.opencompass.models import api_model, thinking_sweep

datasets = needlebench_datasets(
    suite="4k", tasks=["srt"], langs=["en"], lengths=[1000, 2000], depths=[0, 50, 100], repeats=1
)
models = thinking_sweep(
    api_model(
        abbr="think",
        model="flaky",
        # the scripted server names no tokenizer: gpt-4's encoding, which OpenCompass falls back to, named
        # so that each infer task skips the transformers import (~4 s) its fallback costs
        tokenizer_path="gpt-4",
        base_url=os.environ["NEEDLEBENCH_API_BASE"],
        max_seq_len=100000,
        max_out_len=200,
        batch_size=6,
        retry=1,
        timeout=30,
        query_per_second=100,
    ),
    budgets=[8, 30],
)
infer, eval = runtime(num_shards=1, max_workers=1, eval_workers=1)
summarizer = dict(type=SUMMARIZER)
