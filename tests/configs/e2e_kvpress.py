# KV-cache compression as an axis, the wiring (tests/test_kv_press.py): the bundled SmolLM2 as it ships, under
# SnapKV at ratio 0 (the press on, removing nothing) and 0.5 before the question is seen, and under Finch (query
# aware only) at 0.5, one model each in one OpenCompass run.
_base_ = []

from needlebench.opencompass.configs import SUMMARIZER, needlebench_datasets, runtime
from needlebench.opencompass.models import kvpress_sweep, smollm2_model

_base_model = smollm2_model()
models = kvpress_sweep(_base_model, presses=["SnapKVPress"], ratios=[0.0, 0.5]) + kvpress_sweep(
    _base_model, presses=["FinchPress"], ratios=[0.5], queries=["aware"], baseline=False
)
datasets = needlebench_datasets(suite="4k", tasks=["srt"], langs=["en"], lengths=[1000], depths=[0, 100], repeats=1)
infer, eval = runtime()
summarizer = dict(type=SUMMARIZER)
