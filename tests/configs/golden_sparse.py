# Golden-digest config (tests/test_determinism.py): a 4k-suite S-RT/M-RT/M-RS slice, both languages.
_base_ = []

from needlebench.opencompass.configs import needlebench_datasets

datasets = needlebench_datasets(
    suite="4k",
    tasks=["srt", "mrt", "mrs"],
    langs=["en", "zh"],
    lengths=[1000, 4000],
    depths=[0, 50, 100],
    repeats=1,
)
