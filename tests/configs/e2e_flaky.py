# S-RT through our API model against the fault-injecting server (tools/flaky_server.py).
# max_seq_len 1500 leaves 1420 tokens of room: the 1000-token prompts fit, the 2000-token ones are shortened,
# so the run has failed requests and shortened prompts for the two summaries to agree on. The model's text
# postprocessor (as reasoning models set; named by its dotted path, since a plain config cannot dump a
# function) must let the failed requests' prediction objects through.
_base_ = []

import os

from needlebench.opencompass.configs import SUMMARIZER, needlebench_datasets, runtime
from needlebench.opencompass.models import api_model

models = [
    api_model(
        abbr="api-model",
        model="flaky",
        # the scripted server names no tokenizer: gpt-4's encoding, which OpenCompass falls back to, named
        # so that each infer task skips the transformers import (~4 s) its fallback costs
        tokenizer_path="gpt-4",
        base_url=os.environ["NEEDLEBENCH_API_BASE"],
        max_seq_len=1500,
        max_out_len=16,
        batch_size=4,
        retry=2,
        timeout=3,
        query_per_second=50,
        retry_passes=0,  # the failed requests stay failed here; tests/configs/e2e_retry.py asks them again
        pred_postprocessor=dict(type="opencompass.utils.text_postprocessors.extract_non_reasoning_content"),
    )
]
datasets = needlebench_datasets(suite="4k", tasks=["srt"], lengths=[1000, 2000], depths=[0, 50, 100], repeats=1)
infer, eval = runtime(num_shards=1, eval_workers=1)
summarizer = dict(type=SUMMARIZER, all_metrics=True)  # its tests read the per-length rows
