# Context extension on the vLLM CPU server (tests/test_rope_engines.py, opt-in: scripts/test.sh -m engine): one
# server per factor, started with its scaling (x1: as SmolLM2 ships; x2: --hf-overrides with YaRN x2 of 8,192),
# the same S-RT en 8k and 16k cells as the HF run; the server's own configuration says which scaling answered.
#   VLLM_PORT=8011 VLLM_SERVED_NAME=smollm2-135m-instruct ROPE_ABBR=smollm2@yarn-x2 opencompass <this file>
_base_ = []

import os

from needlebench import __file__ as _package_init
from needlebench.opencompass.configs import SUMMARIZER, needlebench_datasets, runtime
from needlebench.opencompass.models import api_model

_tokenizer = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(_package_init))), ".cache", "smollm2-135m-hf")
models = [
    api_model(
        abbr=os.environ.get("ROPE_ABBR", "smollm2@rope-x1"),
        model=os.environ.get("VLLM_SERVED_NAME", "smollm2-135m-instruct"),
        base_url=f"http://127.0.0.1:{int(os.environ.get('VLLM_PORT', '8011'))}/v1",
        max_seq_len=16384,
        max_out_len=24,
        tokenizer_path=_tokenizer,
    )
]
datasets = needlebench_datasets(suite="32k", tasks=["srt"], langs=["en"], lengths=[8000, 16000], depths=[50], repeats=1)
infer, eval = runtime(num_shards=1, eval_workers=1, beyond_window="mark")
summarizer = dict(type=SUMMARIZER)
