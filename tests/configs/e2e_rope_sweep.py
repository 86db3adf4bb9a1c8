# Context extension as an axis (tests/test_window.py): the bundled SmolLM2 through OpenCompass's HuggingFace
# model as it ships (x1) and under YaRN x2 of its 8,192 positions, one model per factor in one run.
_base_ = []

from needlebench.opencompass.configs import SUMMARIZER, needlebench_datasets, runtime
from needlebench.opencompass.models import rope_sweep, smollm2_model

_base_model = smollm2_model()
models = rope_sweep(_base_model, factors=(1, 2), kind="yarn", original_max_position_embeddings=8192)
datasets = needlebench_datasets(suite="4k", tasks=["srt"], langs=["en"], lengths=[1000], depths=[0, 100], repeats=1)
infer, eval = runtime()
summarizer = dict(type=SUMMARIZER)
