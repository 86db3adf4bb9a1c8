# Qwen2.5-7B-Instruct on vLLM, 128k context through YaRN (factor 4 over its native 32k).
_base_ = []  # keeps mmengine in plain-Python mode: without it, calls below fail with a bare RuntimeError()

from needlebench.opencompass.models import rope_scaling, vllm_model

models = [
    vllm_model(
        abbr="qwen2.5-7b-instruct-vllm-128k",
        path="Qwen/Qwen2.5-7B-Instruct",
        max_seq_len=131072,
        tp=2,
        max_out_len=1024,
        rope=rope_scaling("yarn", 4.0, original_max_position_embeddings=32768),
    )
]
