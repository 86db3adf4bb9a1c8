# What each cell cost (tests/test_cost_ledger.py): an API model against the scripted server, which answers each
# prompt with the cached tokens and vLLM per-request metrics it logs (tools/flaky_server.py --costs), and the
# oracle, an in-process model whose engine reports none: its wall time only, shared over its batch.
_base_ = []

import os

from needlebench.opencompass.configs import SUMMARIZER, needlebench_datasets, runtime
from needlebench.opencompass.models import api_model

datasets = needlebench_datasets(
    suite="4k", tasks=["srt"], langs=["en"], lengths=[1000, 2000], depths=[0, 50, 100], repeats=1
)
models = [
    api_model(
        abbr="served",
        model="flaky",
        # the scripted server names no tokenizer: gpt-4's encoding, which OpenCompass falls back to, named
        # so that each infer task skips the transformers import (~4 s) its fallback costs
        tokenizer_path="gpt-4",
        base_url=os.environ["NEEDLEBENCH_API_BASE"],
        max_seq_len=100000,
        max_out_len=32,
        batch_size=6,
        retry=1,
        timeout=30,
        query_per_second=100,
    ),
    dict(
        type="needlebench.opencompass.scripted.OracleModel",
        abbr="oracle",
        datasets=datasets,
        max_seq_len=100000,
        max_out_len=32,
        batch_size=6,
        run_cfg=dict(num_gpus=0),
    ),
]
infer, eval = runtime(num_shards=1, max_workers=1, eval_workers=1)
summarizer = dict(type=SUMMARIZER, prices=os.environ["NEEDLEBENCH_PRICES"])  # the ledger's money
