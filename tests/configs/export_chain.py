_base_ = []

from needlebench.opencompass.configs import needlechain_datasets

datasets = needlechain_datasets(k_values=[5, 10, 20, 50, 100, 200], points=3)
