_base_ = []

from needlebench.opencompass.configs import atc_datasets

datasets = atc_datasets(needle_counts=[2, 4, 8, 16, 32, 64], repeats=3)
