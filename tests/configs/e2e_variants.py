# Models varied along two axes in one OpenCompass run (tests/test_kv_press.py): the bundled SmolLM2 as it ships;
# under SnapKV at ratio 0 (the press on, removing nothing) before the question is seen, built by hand under a name
# of its own (its baseline found by identity); under YaRN x2 of its 8,192 positions, swept; and that scaled model
# under Finch (query aware only) at 0.5, swept over it (its baseline the scaled one).
_base_ = []

from needlebench.opencompass.configs import SUMMARIZER, needlebench_datasets, runtime
from needlebench.opencompass.models import kvpress_model, kvpress_sweep, rope_scaling, smollm2_folder, smollm2_model
from needlebench.opencompass.models import sweep

_plain = smollm2_model()
_scaled = sweep(_plain, "rope", [rope_scaling("yarn", 2, 8192)])
_by_hand = kvpress_model(
    "press-on",
    smollm2_folder(),
    8192,
    press="SnapKVPress",
    compression_ratio=0.0,
    max_out_len=24,
    num_gpus=0,
    model_kwargs=dict(torch_dtype="float32", device_map="cpu"),
    pad_token_id=2,
    stop_words=["<|im_end|>"],
    generation_kwargs=dict(do_sample=False),
)
models = [
    _plain,
    _by_hand,
    *_scaled,
    *kvpress_sweep(_scaled, presses=["FinchPress"], ratios=[0.5], queries=["aware"], baseline=False),
]
datasets = needlebench_datasets(suite="4k", tasks=["srt"], langs=["en"], lengths=[1000], depths=[0, 100], repeats=1)
infer, eval = runtime(eval_workers=1)
summarizer = dict(type=SUMMARIZER)
