# Qwen2.5-7B-Instruct-1M on vLLM (tensor parallel 4) for the 200k / 256k / 1000k suites.
_base_ = []  # keeps mmengine in plain-Python mode: without it, calls below fail with a bare RuntimeError()

from needlebench.opencompass.models import vllm_model

models = [
    vllm_model(
        abbr="qwen2.5-7b-instruct-1m-vllm",
        path="Qwen/Qwen2.5-7B-Instruct-1M",
        max_seq_len=1010000,
        tp=4,
        max_out_len=1024,
        batch_size=4,
        model_kwargs=dict(enable_chunked_prefill=True, max_num_batched_tokens=131072),
    )
]
