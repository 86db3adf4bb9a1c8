# A run resumed after a setting changed (tests/test_reliability.py): the shard count, the output budget and
# the tokenizer come from the environment, so one work dir can be resumed under another plan. The model is
# the oracle writing down every prompt it is asked (tests/counting_model.py).
_base_ = []

import os

from needlebench.opencompass.configs import SUMMARIZER, needlebench_datasets, runtime

datasets = needlebench_datasets(
    suite="4k",
    tasks=["srt", "mrs"],
    langs=["en"],
    lengths=[1000, 2000],
    depths=[0, 100],
    repeats=1,
    mrs=dict(num_needles=[2]),
)
_tokenizer = os.environ.get("NEEDLEBENCH_TEST_TOKENIZER")
models = [
    dict(
        type="counting_model.CountingOracle",
        abbr="counted",
        datasets=datasets,
        calls=os.environ["NEEDLEBENCH_TEST_CALLS"],
        max_seq_len=200000,
        max_out_len=int(os.environ.get("NEEDLEBENCH_TEST_OUT", "16")),
        batch_size=2,
        run_cfg=dict(num_gpus=0),
        **({"tokenizer_path": _tokenizer} if _tokenizer else {}),
    )
]
infer, eval = runtime(num_shards=int(os.environ.get("NEEDLEBENCH_TEST_SHARDS", "2")), max_workers=2, eval_workers=1)
summarizer = dict(type=SUMMARIZER)
