# The main job (scripts/main.sh, README.md), and the run tests/test_e2e_opencompass.py checks: S-RT in English
# and Chinese at 1k and 2k tokens and three depths, one M-RT sample, against the bundled CPU model.
# Kept small because the test suite runs it too; its two shards cut one dataset in two (OpenCompass merges the parts).
_base_ = ["models/smollm2_135m_cpu.py"]

from needlebench.opencompass.configs import SUMMARIZER, needlebench_datasets, runtime

datasets = needlebench_datasets(
    suite="4k", tasks=["srt"], langs=["en", "zh"], lengths=[1000, 2000], depths=[0, 50, 100], repeats=1, max_out_len=24
) + needlebench_datasets(
    suite="4k", tasks=["mrt"], langs=["en"], lengths=[1000], repeats=1, max_out_len=24, mrt=dict(num_needles=[2])
)

infer, eval = runtime(num_shards=2, max_workers=1, eval_workers=2)
summarizer = dict(type=SUMMARIZER)
work_dir = "outputs/needlebench_tiny"
