# The README's main job: S-RT and M-RT, English and Chinese, 1k-4k tokens,
# three depths, against the bundled CPU model. A few minutes on 2 cores.
_base_ = ["models/smollm2_135m_cpu.py"]

from needlebench.opencompass.configs import SUMMARIZER, needlebench_datasets, runtime

datasets = needlebench_datasets(
    suite="4k",
    tasks=["srt", "mrt"],
    lengths=[1000, 2000, 4000],
    depths=[0, 50, 100],
    repeats=1,
    max_out_len=48,
    mrt=dict(num_needles=[3]),
)

infer, eval = runtime(num_shards=1, max_workers=1, eval_workers=2)
summarizer = dict(type=SUMMARIZER)
work_dir = "outputs/needlebench_tiny"
