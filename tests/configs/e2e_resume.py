# A slow oracle over two shards: the resume test kills this run (SIGKILL) and resumes it with -r;
# the oracle scores 100 only if every prediction is matched to its own sample.
_base_ = []

import os

from needlebench.opencompass.configs import SUMMARIZER, needlebench_datasets, runtime

# S-RT and M-RS share their haystack: the partitioner interleaves them in numbered parts (planning/stream.py)
datasets = needlebench_datasets(
    suite="4k",
    tasks=["srt", "mrt", "mrs"],
    lengths=[1000, 2000],
    depths=[0, 50, 100],
    repeats=1,
    mrs=dict(num_needles=[2]),
)
models = [
    dict(
        type="needlebench.opencompass.scripted.OracleModel",
        abbr="slow",
        datasets=datasets,
        # seconds per answer, so a kill lands mid-inference; runs that are not killed then set 0
        delay=float(os.environ.get("NEEDLEBENCH_TEST_DELAY", "1.0")),
        max_seq_len=200000,
        max_out_len=16,
        batch_size=1,
        run_cfg=dict(num_gpus=0),
    )
]
infer, eval = runtime(num_shards=2, max_workers=1, eval_workers=1)
# one eval task per dataset (not one group): the test kills the run between two of them
eval["partitioner"]["eval_tasks"] = 0
summarizer = dict(type=SUMMARIZER)
