# A tiny config for `needlebench plan` tests: S-RT and M-RT in English at 1k and 2k tokens, three
# depths, two shards; a long-context model, one whose 1,700-token context cuts the 2k cells, and a
# reasoning model whose 1,200-token thinking budget does not fit beside the 2k prompts in its 2,700 tokens.
_base_ = []

from needlebench.opencompass.configs import needlebench_datasets, runtime
from needlebench.opencompass.models import reasoning

_model = dict(type="opencompass.models.HuggingFacewithChatTemplate", path="org/not-downloaded", batch_size=1)
models = [
    dict(_model, abbr="long", max_seq_len=32768, max_out_len=64),
    dict(_model, abbr="short", max_seq_len=1700, max_out_len=100),
    reasoning(dict(_model, abbr="thinker", max_seq_len=2700), max_out_len=1200),
]
datasets = needlebench_datasets(
    suite="4k",
    tasks=["srt", "mrt"],
    langs=["en"],
    lengths=[1000, 2000],
    depths=[0, 50, 100],
    repeats=2,
    mrt=dict(num_needles=[2]),
)
infer, eval = runtime(num_shards=2)
