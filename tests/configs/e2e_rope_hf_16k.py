# Context extension as an axis on the HF engine at the lengths it is for (tests/test_rope_engines.py, opt-in:
# scripts/test.sh -m engine): SmolLM2 (8,192 positions) as it ships and under YaRN x2, S-RT en at 8k and 16k,
# one sample per cell; the 16k cell is past x1's window, so the run marks it instead of stopping.
_base_ = []

from needlebench.opencompass.configs import SUMMARIZER, needlebench_datasets, runtime
from needlebench.opencompass.models import rope_sweep, smollm2_model

_base_model = smollm2_model(max_seq_len=20000)
models = rope_sweep(_base_model, factors=(1, 2), kind="yarn", original_max_position_embeddings=8192)
datasets = needlebench_datasets(suite="32k", tasks=["srt"], langs=["en"], lengths=[8000, 16000], depths=[50], repeats=1)
infer, eval = runtime(beyond_window="mark")
summarizer = dict(type=SUMMARIZER)
