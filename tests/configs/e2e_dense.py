# ATC and NeedleChain through the real opencompass pipeline with the tiny CPU model.
_base_ = ["../../configs/models/smollm2_135m_cpu.py"]

from needlebench.opencompass.configs import atc_datasets, needlechain_datasets

datasets = atc_datasets(
    langs=["en"], needle_counts=[2, 4], question_types=["eldest_ancestor"], repeats=1, few_shot=False, max_out_len=24
) + needlechain_datasets(k_values=[5], points=1, max_out_len=24)

infer = dict(
    partitioner=dict(type="NumWorkerPartitioner", num_worker=1),
    runner=dict(type="LocalRunner", max_num_workers=1, task=dict(type="OpenICLInferTask")),
)
eval = dict(
    partitioner=dict(type="NaivePartitioner"),
    runner=dict(type="LocalRunner", max_num_workers=2, task=dict(type="OpenICLEvalTask")),
)
summarizer = dict(type="needlebench.opencompass.summarizer.NeedleBenchSummarizer")
