# The adaptive ladder on a real model (tests/test_adaptive_run.py, opt-in: -m methods): the bundled SmolLM2 as it
# ships and under SnapKV at ratio 0.5, S-RT English at 1k, 2k, 4k and 8k, five depths, two repeats; run once over
# the full grid and once adaptive (NEEDLEBENCH_TEST_ADAPTIVE=1), so the two effective lengths can be compared.
_base_ = []

import os

from needlebench.opencompass.configs import SUMMARIZER, needlebench_datasets, runtime
from needlebench.opencompass.models import kvpress_sweep, smollm2_model

_base_model = smollm2_model(max_out_len=32)
models = [_base_model] + kvpress_sweep(_base_model, presses=["SnapKVPress"], ratios=[0.5], baseline=False)
datasets = needlebench_datasets(
    suite="8k", tasks=["srt"], langs=["en"], lengths=[1000, 2000, 4000, 8000], depths=[0, 25, 50, 75, 100], repeats=2
)
_adaptive = dict(seed=0) if os.environ.get("NEEDLEBENCH_TEST_ADAPTIVE") == "1" else None
infer, eval = runtime(adaptive=_adaptive)
summarizer = dict(type=SUMMARIZER)
