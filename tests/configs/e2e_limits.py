# The runs under real limits (tests/test_limits.py): a full disk at each stage, and a memory cap.
# One sparse dataset in one infer task, the oracle model (every answer its gold, so the summary is 100).
# NEEDLEBENCH_TEST_KV_BYTES: memory the oracle holds per prompt token answered (a serving engine's KV cache);
# NEEDLEBENCH_TEST_RECORD: a file the oracle appends one line per call to (what a resume answered again).
_base_ = []

import os

from needlebench.opencompass.configs import SUMMARIZER, needlebench_datasets, runtime

datasets = needlebench_datasets(
    suite="32k", tasks=["srt"], langs=["en"], lengths=[2000, 8000], depths=[0, 50, 100], repeats=2
)
models = [
    dict(
        type="needlebench.opencompass.scripted.OracleModel",
        abbr="oracle",
        max_seq_len=200_000,
        max_out_len=64,
        batch_size=1,
        kv_bytes_per_token=int(os.environ.get("NEEDLEBENCH_TEST_KV_BYTES", "0")),
        record=os.environ.get("NEEDLEBENCH_TEST_RECORD") or None,
        datasets=datasets,
        run_cfg=dict(num_gpus=0),
    )
]
infer, eval = runtime(num_shards=1, max_workers=1, eval_workers=1)
summarizer = dict(type=SUMMARIZER)
