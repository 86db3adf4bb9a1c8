# The Slurm test suite (tests/test_slurm.py): the oracle over a tiny suite, cut into shards that run
# as real srun jobs on the one-node cluster of tools/slurm_local.sh. The environment picks what a test
# varies, so every run shares this one config and the LocalRunner run is the same config too:
#   NB_RUNNER     SlurmRunner (default) or LocalRunner
#   NB_PARTITION  the Slurm partition (default debug)
#   NB_SHARDS     inference shards = Slurm jobs per model (default 3)
#   NB_WORKERS    jobs in flight at once (default 3)
#   NB_GPUS       the model's run_cfg num_gpus: --gres=gpu:N per inference job (default 0)
#   NB_DELAY      seconds the oracle waits per prompt, so a job lives long enough to scancel (default 0)
#   NB_RECORD     a file where the oracle notes each call's Slurm job, CUDA_VISIBLE_DEVICES and times
_base_ = []

from os import environ as _env

from needlebench.opencompass.configs import SUMMARIZER, needlebench_datasets, runtime

_runner = _env.get("NB_RUNNER", "SlurmRunner")
# retry=0: a cancelled job stays failed (OpenCompass would resubmit it twice), so the test resumes it
_slurm = dict(partition=_env.get("NB_PARTITION", "debug"), retry=0) if _runner == "SlurmRunner" else {}
datasets = needlebench_datasets(
    suite="4k", tasks=["srt", "mrt"], langs=["en"], lengths=[1000], depths=[0, 50, 100], repeats=1
)
models = [
    dict(
        type="needlebench.opencompass.scripted.OracleModel",
        abbr="oracle",
        datasets=datasets,
        delay=float(_env.get("NB_DELAY", "0")),
        record=_env.get("NB_RECORD") or None,
        max_seq_len=200000,
        max_out_len=16,
        batch_size=1,
        run_cfg=dict(num_gpus=int(_env.get("NB_GPUS", "0"))),
    )
]
_workers = int(_env.get("NB_WORKERS", "3"))
infer, eval = runtime(
    num_shards=int(_env.get("NB_SHARDS", "3")), max_workers=_workers, eval_workers=2, runner=_runner, **_slurm
)
summarizer = dict(type=SUMMARIZER)
del _env  # os.environ itself cannot be dumped into the run's config copy
