# Context extension as an axis (tests/test_window.py): the bundled SmolLM2 through OpenCompass's HuggingFace
# model as it ships (x1) and under YaRN x2 of its 8,192 positions, one model per factor in one run.
_base_ = []

from needlebench.opencompass.configs import SUMMARIZER, needlebench_datasets, runtime
from needlebench.opencompass.models import hf_model, rope_sweep, smollm2_folder

_base_model = hf_model(
    "smollm2",
    smollm2_folder(),
    max_seq_len=8192,
    max_out_len=24,
    num_gpus=0,
    model_kwargs=dict(torch_dtype="float32", device_map="cpu"),
    pad_token_id=2,
    stop_words=["<|im_end|>"],
    generation_kwargs=dict(do_sample=False),
)
models = rope_sweep(_base_model, factors=(1, 2), kind="yarn", original_max_position_embeddings=8192)
datasets = needlebench_datasets(suite="4k", tasks=["srt"], langs=["en"], lengths=[1000], depths=[0, 100], repeats=1)
infer, eval = runtime()
summarizer = dict(type=SUMMARIZER)
