# An adaptive run (tests/test_adaptive_run.py): two scripted models whose effective length is known, the oracle
# right below 2,500 prompt tokens (so at 1k and 2k, not 3k) and right everywhere, on S-RT English with 20 prompts
# a length. Each model climbs its own ladder in rounds; the tables mark the cells no round asked.
_base_ = []

import os

from needlebench.opencompass.configs import SUMMARIZER, needlebench_datasets, runtime

datasets = needlebench_datasets(
    suite="4k", tasks=["srt"], langs=["en"], lengths=[1000, 2000, 3000], depths=[0, 25, 50, 75, 100], repeats=4
)
models = [
    dict(
        type="length_limited_model.LengthLimitedOracle",
        abbr=abbr,
        datasets=datasets,
        right_below=right_below,
        # seconds per answer, so a kill lands mid-inference; runs that are not killed set 0
        delay=float(os.environ.get("NEEDLEBENCH_TEST_DELAY", "0")),
        max_seq_len=32768,
        max_out_len=32,
        batch_size=1,
        run_cfg=dict(num_gpus=0),
    )
    for abbr, right_below in (("cut", 2500), ("right", 10**9))
]
# the re-plan test resumes a finished run under two shards
shards = int(os.environ.get("NEEDLEBENCH_TEST_SHARDS", "1"))
infer, eval = runtime(num_shards=shards, max_workers=2, eval_workers=1, adaptive=dict(seed=1))
summarizer = dict(type=SUMMARIZER)
