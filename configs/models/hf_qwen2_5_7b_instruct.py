# Qwen2.5-7B-Instruct through HuggingFace transformers (slow for long contexts; vLLM is preferred).
_base_ = []  # keeps mmengine in plain-Python mode: without it, calls below fail with a bare RuntimeError()

from needlebench.opencompass.models import hf_model

models = [hf_model(abbr="qwen2.5-7b-instruct-hf", path="Qwen/Qwen2.5-7B-Instruct", max_seq_len=32768, max_out_len=1024)]
