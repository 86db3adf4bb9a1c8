# Three samples through the real opencompass pipeline with the tiny CPU model.
_base_ = ["../../configs/models/smollm2_135m_cpu.py"]

from needlebench.opencompass.configs import needlebench_datasets

datasets = needlebench_datasets(
    suite="4k", tasks=["srt"], langs=["en", "zh"], lengths=[1000], depths=[50], repeats=1, max_out_len=24
) + needlebench_datasets(
    suite="4k", tasks=["mrt"], langs=["en"], lengths=[1000], repeats=1, max_out_len=24, mrt=dict(num_needles=[2])
)

infer = dict(
    partitioner=dict(type="NumWorkerPartitioner", num_worker=1),
    runner=dict(type="LocalRunner", max_num_workers=1, task=dict(type="OpenICLInferTask")),
)
eval = dict(
    partitioner=dict(type="NaivePartitioner"),
    runner=dict(type="LocalRunner", max_num_workers=2, task=dict(type="OpenICLEvalTask")),
)
summarizer = dict(type="needlebench.opencompass.summarizer.NeedleBenchSummarizer")
