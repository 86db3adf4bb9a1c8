# Rungs past 1M (tests/test_beyond_1m.py): the oracle at the 2000k suite's longest length and the 4000k suite's,
# S-RT English, two depths: every cell scores 100, and every table notes the cells beyond OpenCompass's protocol.
_base_ = []

from needlebench.opencompass.configs import SUMMARIZER, needlebench_datasets, runtime

_cells = dict(tasks=["srt"], langs=["en"], depths=[0, 100], repeats=1)
datasets = needlebench_datasets(suite="2000k", lengths=[1000, 2000000], **_cells) + needlebench_datasets(
    suite="4000k", lengths=[4000000], **_cells
)
models = [
    dict(
        type="needlebench.opencompass.scripted.OracleModel",
        abbr="oracle",
        datasets=datasets,
        max_seq_len=8_200_000,
        max_out_len=32,
        batch_size=2,
        run_cfg=dict(num_gpus=0),
    )
]
infer, eval = runtime(num_shards=1, max_workers=1, eval_workers=1, prompts="digest")
summarizer = dict(type=SUMMARIZER)
