# Hostile model output end to end (tests/test_hostile_e2e.py): our API model against tools/flaky_server.py
# --hostile, which answers every prompt with a hostile text (every Unicode line break, NUL, lone surrogates,
# invalid UTF-8 on the wire, 1 MB, markup and script break-outs, template syntax, ANSI escapes), after the
# sample's gold for half the prompts and alone for the others. 12 S-RT and 4 M-RT samples, both languages;
# no fault is injected and every prompt fits, so every planned sample must be scored and shown.
_base_ = []

import os

from needlebench.opencompass.configs import SUMMARIZER, needlebench_datasets, runtime
from needlebench.opencompass.models import api_model

models = [
    api_model(
        abbr="hostile",
        model="flaky",
        # the scripted server names no tokenizer: gpt-4's encoding, which OpenCompass falls back to, named
        # so that each infer task skips the transformers import (~4 s) its fallback costs
        tokenizer_path="gpt-4",
        base_url=os.environ["NEEDLEBENCH_API_BASE"],
        max_seq_len=4096,
        max_out_len=64,
        batch_size=8,
        retry=1,
        timeout=60,
        query_per_second=50,
        retry_passes=0,
    )
]
datasets = needlebench_datasets(
    suite="4k",
    tasks=["srt", "mrt"],
    lengths=[1000, 2000],
    depths=[0, 50, 100],
    repeats=1,
    mrt=dict(num_needles=[2]),
)
infer, eval = runtime(num_shards=1, eval_workers=1)
summarizer = dict(type=SUMMARIZER)
