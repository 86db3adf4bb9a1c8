# One small oracle run, made by the `opencompass` script and by `needlebench run` (the lean start of the same
# command line): tests/test_task_entry.py compares the two runs' files.
_base_ = []

from needlebench.opencompass.configs import SUMMARIZER, needlebench_datasets, runtime

datasets = needlebench_datasets(suite="4k", tasks=["srt", "mrt"], lengths=[1000], depths=[0, 100], repeats=1)
models = [
    dict(
        type="needlebench.opencompass.scripted.OracleModel",
        abbr="oracle",
        datasets=datasets,
        max_seq_len=200000,
        max_out_len=16,
        batch_size=4,
        run_cfg=dict(num_gpus=0),
    )
]
infer, eval = runtime(num_shards=1, eval_workers=1)
summarizer = dict(type=SUMMARIZER)
