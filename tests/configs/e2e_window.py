# A model whose config.json gives a 3,000-token native window, asked for 1k-4k cells (tests/test_window.py):
# the oracle writing down every prompt it is asked (tests/counting_model.py), its path a folder holding only
# that config.json (NEEDLEBENCH_TEST_WINDOW_MODEL); runtime(beyond_window=...) from NEEDLEBENCH_TEST_BEYOND.
_base_ = []

import os

from needlebench.opencompass.configs import SUMMARIZER, needlebench_datasets, runtime

datasets = needlebench_datasets(
    suite="4k", tasks=["srt"], langs=["en"], lengths=[1000, 2000, 4000], depths=[0, 100], repeats=1
)
models = [
    dict(
        type="counting_model.CountingOracle",
        abbr="windowed",
        path=os.environ["NEEDLEBENCH_TEST_WINDOW_MODEL"],
        datasets=datasets,
        calls=os.environ["NEEDLEBENCH_TEST_CALLS"],
        max_seq_len=200000,
        max_out_len=16,
        batch_size=2,
        run_cfg=dict(num_gpus=0),
    )
]
infer, eval = runtime(beyond_window=os.environ.get("NEEDLEBENCH_TEST_BEYOND", "stop"), eval_workers=1)
summarizer = dict(type=SUMMARIZER)
