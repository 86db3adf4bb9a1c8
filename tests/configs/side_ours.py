# Ours, the same slice as side_builtin.py (OpenCompass's own NeedleBench v2), from the same stand-in files
# (corpus="opencompass": $COMPASS_DATA_CACHE/data/needlebench), answered by the same prompt-scripted model.
_base_ = ["side_model.py"]  # the same scripted model; also keeps mmengine in plain-Python mode

from needlebench.opencompass.configs import SUMMARIZER, atc_datasets, needlebench_datasets, runtime

datasets = needlebench_datasets(
    suite="4k",
    langs=["en", "zh"],
    lengths=[1000, 2000],
    depths=[0, 50, 100],
    corpus="opencompass",
    mrt=dict(depths=[0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100]),
    mrs=dict(num_needles=[2]),
) + atc_datasets(langs=["en"], needle_counts=[2, 4, 8], corpus="opencompass")
infer, eval = runtime(num_shards=1, eval_workers=2)
summarizer = dict(type=SUMMARIZER, all_metrics=True)  # its tests read the ATC rows per needle count
