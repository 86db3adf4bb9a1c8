"""One timed generation of a whole suite, in its own process, reporting time, bytes and peak RSS.

python -m bench.gen_worker ours 128k
python -m bench.gen_worker builtin 128k WORKDIR   (WORKDIR holds data/needlebench stand-ins)
python -m bench.gen_worker builtin 4k WORKDIR srt (one task of the suite: the tiny bench's)
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from pathlib import Path

# OpenCompass's v2 dataset class of each sparse task (its suite configs list one dataset per cell)
BUILTIN_CLASS = {
    "srt": "NeedleBenchOriginDataset",
    "mrt": "NeedleBenchParallelDataset",
    "mrs": "NeedleBenchMultiDataset",
}


def ours(suite: str, task: str | None = None) -> tuple[int, int]:
    from needlebench.opencompass.configs import needlebench_datasets
    from needlebench.tasks import config_params, get_task, make_params

    samples = nbytes = 0
    for d in needlebench_datasets(suite=suite, **({"tasks": [task]} if task else {})):
        params = make_params(d["task"], **config_params(d))
        for s in get_task(d["task"]).generate(params):
            samples += 1
            nbytes += len(s.prompt) if s.prompt.isascii() else len(s.prompt.encode("utf-8"))
    return samples, nbytes


def builtin(suite: str, workdir: str, task: str | None = None) -> tuple[int, int]:
    import huggingface_hub
    import opencompass.datasets.needlebench_v2.multi as multi
    from mmengine.config import Config
    from opencompass.utils import build_dataset_from_cfg

    data = Path(workdir) / "data" / "needlebench"

    def local(repo_id: str, filename: str, repo_type: str | None = None, **_: object) -> str:
        return str(data / filename)

    # the built-in M-RS loader always calls the hub; offline it needs a local answer
    multi.hf_hub_download = local
    huggingface_hub.hf_hub_download = local
    os.chdir(workdir)
    import opencompass

    cfg_path = (
        Path(opencompass.__file__).parent
        / "configs"
        / "datasets"
        / "needlebench_v2"
        / f"needlebench_v2_{suite}"
        / f"needlebench_v2_{suite}.py"
    )
    cfg = Config.fromfile(str(cfg_path))
    datasets = cfg["needlebench_datasets"]
    if task:
        datasets = [d for d in datasets if getattr(d["type"], "__name__", str(d["type"])).endswith(BUILTIN_CLASS[task])]
    samples = nbytes = 0
    for d in datasets:
        ds = build_dataset_from_cfg(d).test
        samples += len(ds)
        nbytes += sum(len(p.encode("utf-8")) for p in ds["prompt"])
    return samples, nbytes


def main() -> None:
    impl, suite = sys.argv[1], sys.argv[2]
    workdir = sys.argv[3] if len(sys.argv) > 3 else ""
    task = sys.argv[4] if len(sys.argv) > 4 else None
    start = time.perf_counter()
    samples, nbytes = ours(suite, task) if impl == "ours" else builtin(suite, workdir, task)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(
        json.dumps(
            {"impl": impl, "suite": suite, "seconds": seconds, "samples": samples, "bytes": nbytes, "peak_rss": peak}
        )
    )


if __name__ == "__main__":
    main()
