# OpenCompass's own NeedleBench v2 (its installed configs and loaders, unmodified) on stand-in files, answered by
# the prompt-scripted model; tests/test_side_by_side.py runs it next to ours (side_ours.py) and compares the
# summaries cell by cell. A slice of the 4k suite: lengths 1000/2000, depths 0/50/100 where a dataset has one depth,
# M-RS with 2 needles, ATC with 2/4/8 needles; the repeats are OpenCompass's (10, M-RT 25).
from mmengine.config import read_base

with read_base():
    from .side_model import models
    from opencompass.configs.datasets.needlebench_v2.atc.atc_0shot_nocot_2_power_en import (
        needlebench_datasets as _atc,
    )
    from opencompass.configs.datasets.needlebench_v2.needlebench_v2_4k.needlebench_v2_multi_reasoning_4k import (
        needlebench_2needle_en_datasets as _mrs_en,
        needlebench_2needle_zh_datasets as _mrs_zh,
    )
    from opencompass.configs.datasets.needlebench_v2.needlebench_v2_4k.needlebench_v2_multi_retrieval_4k import (
        needlebench_en_datasets as _mrt_en,
        needlebench_zh_datasets as _mrt_zh,
    )
    from opencompass.configs.datasets.needlebench_v2.needlebench_v2_4k.needlebench_v2_single_4k import (
        needlebench_en_datasets as _srt_en,
        needlebench_zh_datasets as _srt_zh,
    )

datasets = [
    d
    for d in _srt_en + _srt_zh + _mrt_en + _mrt_zh + _mrs_en + _mrs_zh
    if d["length"] in (1000, 2000) and d.get("depth", 0) in (0, 50, 100)
] + [d for d in _atc if d["num_needles"] in (2, 4, 8)]
from opencompass.partitioners import NaivePartitioner, SizePartitioner
from opencompass.runners import LocalRunner
from opencompass.tasks import OpenICLEvalTask, OpenICLInferTask

infer = dict(
    partitioner=dict(type=SizePartitioner, max_task_size=100_000_000),  # one infer task: no per-task import cost
    runner=dict(type=LocalRunner, max_num_workers=2, task=dict(type=OpenICLInferTask)),
)
eval = dict(
    partitioner=dict(type=NaivePartitioner, n=40),
    runner=dict(type=LocalRunner, max_num_workers=2, task=dict(type=OpenICLEvalTask)),
)
