# Four scripted models whose effective context length is known (tests/test_effective_length.py): the oracle
# right below 2,500 prompt tokens (so at 1k and 2k, not 3k), right everywhere, wrong everywhere, and right
# everywhere but with its English S-RT requests at 2k failed (as a dead server's).
_base_ = []

from needlebench.opencompass.configs import SUMMARIZER, needlebench_datasets, runtime

datasets = needlebench_datasets(
    suite="4k",
    tasks=["srt", "mrt", "mrs"],
    langs=["en", "zh"],
    lengths=[1000, 2000, 3000],
    depths=[0, 100],
    repeats=1,
    mrt=dict(num_needles=[2]),
    mrs=dict(num_needles=[2]),
)
models = [
    dict(
        type="length_limited_model.LengthLimitedOracle",
        abbr=abbr,
        datasets=datasets,
        **options,
        max_seq_len=32768,
        max_out_len=64,
        batch_size=8,
        run_cfg=dict(num_gpus=0),
    )
    for abbr, options in (
        ("cut", dict(right_below=2500)),
        ("right", dict(right_below=10**9)),
        ("wrong", dict(right_below=0)),
        ("flaky", dict(right_below=10**9, fail_task="srt", fail_lang="en", fail_between=[1500, 2500])),
    )
]
infer, eval = runtime(num_shards=1, max_workers=2, eval_workers=1)
summarizer = dict(type=SUMMARIZER)
