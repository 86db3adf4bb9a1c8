# The install check: an oracle model (every answer is the gold) and a garbage model (hostile text),
# through the real opencompass pipeline with datasets split across shards. The oracle must score
# 100 and the garbage model 0 in every cell it scored; tests/test_e2e_opencompass.py asserts it. A third,
# scripted reasoning model (tests/thinking_model.py, set up by reasoning() as OpenCompass's reasoning
# configs are) answers in think blocks, some cut off at its 48-token budget, some never closed: every
# table must count those in truncated% and its notes.
# Run it from the repository root with tests/ and the root on the path (the scripted models are test modules):
#   PYTHONPATH=tests:. opencompass tests/configs/e2e_oracle.py
_base_ = []

from needlebench.opencompass.configs import SUMMARIZER, atc_datasets, atc_mc_datasets, runtime
from needlebench.opencompass.configs import needlebench_datasets, needlechain_datasets
from needlebench.opencompass.models import reasoning

datasets = (
    needlebench_datasets(
        suite="4k",
        langs=["en", "zh"],
        lengths=[1000, 2000],
        depths=[0, 50, 100],
        repeats=1,
        mrt=dict(num_needles=[2]),
        mrs=dict(num_needles=[2]),
    )
    + atc_datasets(langs=["en"], needle_counts=[2, 4], repeats=1)
    + needlechain_datasets(k_values=[5], points=2)
    + atc_mc_datasets(langs=["en"], styles=["direct"], steps=[2, 3], repeats=1)
)
_scripted = dict(max_seq_len=200_000, max_out_len=4096, batch_size=16, run_cfg=dict(num_gpus=0))
models = [
    # the oracle is told the run's datasets: it reads their rows back from the cache to find each prompt's gold
    dict(type="needlebench.opencompass.scripted.OracleModel", abbr="oracle", datasets=datasets, **_scripted),
    # tests/garbage_model.py: the run needs tests/ and the repository root on PYTHONPATH. Its 6k context leaves
    # 6000 - 4096 - 64 tokens for a prompt: its 2000-token sparse prompts are skipped (overlength="skip"), so its
    # datasets hold other rows than the other models' and OpenCompass's summary must still line them up
    dict(type="garbage_model.GarbageModel", abbr="garbage", **{**_scripted, "max_seq_len": 6000}),
    # tests/thinking_model.py: the oracle's answers in think blocks; its answers cut at max_out_len say so
    reasoning(dict(type="thinking_model.ThinkingModel", abbr="thinker", datasets=datasets, **_scripted), 48),
]
# two shards split datasets as well as three did, with three infer processes fewer
infer, eval = runtime(num_shards=2, eval_workers=2, overlength="skip")
summarizer = dict(type=SUMMARIZER, all_metrics=True)  # its tests read every number, per length and share
