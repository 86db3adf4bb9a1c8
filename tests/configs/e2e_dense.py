# ATC and NeedleChain through the real opencompass pipeline with the tiny CPU model.
_base_ = ["../../configs/models/smollm2_135m_cpu.py"]

from needlebench.opencompass.configs import SUMMARIZER, atc_datasets, needlechain_datasets, runtime

datasets = atc_datasets(
    langs=["en"], needle_counts=[2, 4], question_types=["eldest_ancestor"], repeats=1, few_shot=False, max_out_len=24
) + needlechain_datasets(k_values=[5], points=1, max_out_len=24)

# 1 shard(s): the token-aware partitioner and, with 2, OpenCompass merging split predictions
infer, eval = runtime(num_shards=1, eval_workers=1)
summarizer = dict(type=SUMMARIZER)
