# A small config for export tests: every sparse task, both languages.
_base_ = []

from needlebench.opencompass.configs import needlebench_datasets

datasets = needlebench_datasets(
    suite="32k",
    tasks=["srt", "mrt"],
    lengths=[1000, 8000],
    depths=[0, 25, 50, 75, 100],
    repeats=2,
)
