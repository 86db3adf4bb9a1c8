# The README's main job: S-RT and M-RT, English and Chinese, 1k-4k tokens,
# three depths, against the bundled CPU model. A few minutes on 2 cores.
_base_ = ["models/smollm2_135m_cpu.py"]

from needlebench.opencompass.configs import needlebench_datasets

datasets = needlebench_datasets(
    suite="4k",
    tasks=["srt", "mrt"],
    lengths=[1000, 2000, 4000],
    depths=[0, 50, 100],
    repeats=1,
    max_out_len=48,
    mrt=dict(num_needles=[3]),
)

infer = dict(
    partitioner=dict(type="NumWorkerPartitioner", num_worker=1),
    runner=dict(type="LocalRunner", max_num_workers=1, task=dict(type="OpenICLInferTask")),
)
eval = dict(
    partitioner=dict(type="NaivePartitioner"),
    runner=dict(type="LocalRunner", max_num_workers=2, task=dict(type="OpenICLEvalTask")),
)
work_dir = "outputs/needlebench_tiny"
summarizer = dict(type="needlebench.opencompass.summarizer.NeedleBenchSummarizer")
