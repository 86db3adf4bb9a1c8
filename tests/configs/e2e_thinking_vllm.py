# Thinking budgets on a real engine (tests/test_thinking_engine.py, opt-in: scripts/test.sh -m engine): the vLLM
# CPU server with its deepseek_r1 reasoning parser serves SmolLM2 as a stand-in reasoning model
# (tools/smollm2_think.py: its template opens a think block the model never closes by itself), asked for 8 and
# for 24 reasoning tokens (vLLM's thinking_token_budget) and for none. min_tokens keeps the model from ending
# its turn inside the think block, so only the engine's budget ends the reasoning.
#   VLLM_PORT=8012 VLLM_SERVED_NAME=smollm2-135m-instruct THINK_MODEL_DIR=.cache/smollm2-135m-think opencompass <this file>
_base_ = []

import os

from needlebench.opencompass.configs import SUMMARIZER, needlebench_datasets, runtime
from needlebench.opencompass.models import api_model, thinking_sweep

_model = api_model(
    abbr="smollm2-think",
    model=os.environ.get("VLLM_SERVED_NAME", "smollm2-135m-instruct"),
    base_url=f"http://127.0.0.1:{int(os.environ.get('VLLM_PORT', '8012'))}/v1",
    max_seq_len=4096,
    max_out_len=48,
    tokenizer_path=os.environ["THINK_MODEL_DIR"],
    extra_body={"min_tokens": 40, "skip_special_tokens": False},  # a special token it writes stays in the text
)
models = [_model, *thinking_sweep(_model, budgets=[8, 24])]
datasets = needlebench_datasets(suite="4k", tasks=["srt"], langs=["en"], lengths=[1000], depths=[0, 50, 100], repeats=1)
infer, eval = runtime(num_shards=1, max_workers=1, eval_workers=1)
summarizer = dict(type=SUMMARIZER)
