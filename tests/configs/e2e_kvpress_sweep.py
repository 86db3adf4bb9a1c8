# KV-cache compression as an axis, issue 60's run (tests/test_kv_press.py, opt-in: scripts/test.sh -m methods):
# the bundled SmolLM2 as it ships, and under StreamingLLM and SnapKV before the question is seen and Finch
# (query aware only) with it, each at ratios 0.25, 0.5 and 0.75; S-RT and M-RT at 1k, 2k and 4k in both languages.
_base_ = []

from needlebench.opencompass.configs import SUMMARIZER, needlebench_datasets, runtime
from needlebench.opencompass.models import kvpress_sweep, smollm2_model

_base_model = smollm2_model(max_out_len=32)
_ratios = [0.25, 0.5, 0.75]
models = kvpress_sweep(_base_model, presses=["StreamingLLMPress", "SnapKVPress"], ratios=_ratios) + kvpress_sweep(
    _base_model, presses=["FinchPress"], ratios=_ratios, queries=["aware"], baseline=False
)
datasets = needlebench_datasets(
    suite="4k", tasks=["srt", "mrt"], langs=["en", "zh"], lengths=[1000, 2000, 4000], depths=[50], repeats=1
)
infer, eval = runtime()
summarizer = dict(type=SUMMARIZER)
