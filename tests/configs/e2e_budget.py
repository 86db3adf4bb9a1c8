# Every task through the real opencompass pipeline with a model whose output budget is 32768:
# no dataset may override it (the instant model answers with the budget it was given).
_base_ = []

from needlebench.opencompass.configs import SUMMARIZER, atc_datasets, atc_mc_datasets, runtime
from needlebench.opencompass.configs import needlebench_datasets, needlechain_datasets

models = [
    dict(
        type="needlebench.opencompass.instant.InstantModel",
        abbr="budget-recorder",
        answer="budget={max_out_len}",
        max_seq_len=200000,
        max_out_len=32768,
        batch_size=64,
        run_cfg=dict(num_gpus=0),
    )
]
datasets = (
    needlebench_datasets(suite="4k", langs=["en"], lengths=[1000], depths=[50], repeats=1, mrs=dict(num_needles=[2]))
    + atc_datasets(langs=["en"], needle_counts=[2], question_types=["eldest_ancestor"], repeats=1)
    + needlechain_datasets(k_values=[5], points=1, variants=["forward"], questions=["single"])
    + atc_mc_datasets(langs=["en"], styles=["direct"], steps=[2, 3], repeats=1)
)
infer, eval = runtime(num_shards=1, eval_workers=1)
summarizer = dict(type=SUMMARIZER)
