# Golden-digest config (tests/test_determinism.py): a small NeedleChain set.
_base_ = []

from needlebench.opencompass.configs import needlechain_datasets

datasets = needlechain_datasets(k_values=[5, 10], points=2)
