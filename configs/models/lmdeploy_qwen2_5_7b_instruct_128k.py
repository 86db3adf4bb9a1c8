# Qwen2.5-7B-Instruct on LMDeploy TurboMind, 128k session with dynamic RoPE scaling factor 4.
_base_ = []  # keeps mmengine in plain-Python mode: without it, calls below fail with a bare RuntimeError()

from needlebench.opencompass.models import lmdeploy_model, rope_scaling

models = [
    lmdeploy_model(
        abbr="qwen2.5-7b-instruct-turbomind-128k",
        path="Qwen/Qwen2.5-7B-Instruct",
        max_seq_len=131072,
        tp=2,
        max_out_len=1024,
        rope=rope_scaling("dynamic", 4.0),
    )
]
