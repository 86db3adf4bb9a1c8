# Five samples through the real opencompass pipeline with the tiny CPU model.
_base_ = ["../../configs/models/smollm2_135m_cpu.py"]

from needlebench.opencompass.configs import SUMMARIZER, needlebench_datasets, runtime

datasets = needlebench_datasets(
    suite="4k", tasks=["srt"], langs=["en", "zh"], lengths=[1000], depths=[0, 100], repeats=1, max_out_len=24
) + needlebench_datasets(
    suite="4k", tasks=["mrt"], langs=["en"], lengths=[1000], repeats=1, max_out_len=24, mrt=dict(num_needles=[2])
)

# 2 shards of equal tokens: needlebench_srt_zh_4k is cut in two, and OpenCompass merges its parts
infer, eval = runtime(num_shards=2, eval_workers=2)
summarizer = dict(type=SUMMARIZER)
