# A reasoning model, set up by reasoning() as OpenCompass's own R1 configs are: a 32k output budget and
# OpenCompass's extract_non_reasoning_content as the model's pred_postprocessor. Its eval task applies it to every
# answer before scoring: <think>...</think> pairs are removed, an unclosed <think> is kept (answer and all), as
# OpenCompass scores it. Answers cut off at the budget are flagged (truncated) and counted in every table.
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
