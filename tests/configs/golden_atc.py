# Golden-digest config (tests/test_determinism.py): a small Ancestral Trace Challenge set.
_base_ = []

from needlebench.opencompass.configs import atc_datasets

datasets = atc_datasets(needle_counts=[2, 4, 8], repeats=2)
