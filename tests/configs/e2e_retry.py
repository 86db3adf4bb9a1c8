# Failed requests asked again (tests/test_reliability.py): an API model against the fault-injecting server
# (tools/flaky_server.py, whose --never-every prompts fail their first requests, or every request until it is
# restarted healthy) beside the oracle model, which never fails and must be left as it is.
_base_ = []

import os

from needlebench.opencompass.configs import SUMMARIZER, needlebench_datasets, runtime
from needlebench.opencompass.models import api_model

datasets = needlebench_datasets(suite="4k", tasks=["srt"], lengths=[1000], depths=[0, 50, 100], repeats=2)
models = [
    api_model(
        abbr="api-model",
        model="flaky",
        # the scripted server names no tokenizer: gpt-4's encoding, which OpenCompass falls back to, named
        # so that each infer task skips the transformers import (~4 s) its fallback costs
        tokenizer_path="gpt-4",
        base_url=os.environ["NEEDLEBENCH_API_BASE"],
        max_seq_len=100000,
        max_out_len=16,
        batch_size=4,
        retry=1,  # one try a pass (the openai client's own two retries inside it)
        timeout=3,
        query_per_second=50,
        retry_passes=2,
        retry_waits=(0.5,),
    ),
    dict(
        type="needlebench.opencompass.scripted.OracleModel",
        abbr="oracle",
        datasets=datasets,
        max_seq_len=100000,
        max_out_len=16,
        batch_size=4,
        run_cfg=dict(num_gpus=0),
    ),
]
infer, eval = runtime(num_shards=1, max_workers=2, eval_workers=1)
summarizer = dict(type=SUMMARIZER)
