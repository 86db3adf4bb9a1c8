# A reasoning model: 32k output budget; <think> blocks are stripped before scoring.
_base_ = []  # keeps mmengine in plain-Python mode: without it, calls below fail with a bare RuntimeError()

from needlebench.opencompass.models import reasoning, vllm_model

models = [
    reasoning(
        vllm_model(
            abbr="deepseek-r1-distill-qwen-7b-vllm",
            path="deepseek-ai/DeepSeek-R1-Distill-Qwen-7B",
            max_seq_len=131072,
            tp=2,
            generation_kwargs=dict(temperature=0.6, top_p=0.95),
        ),
        max_out_len=32768,
    )
]
