# OpenCompass's in-process vLLM model (VLLMwithChatTemplate, built by our vllm_model) on vLLM's CPU build,
# in one environment with OpenCompass 0.5.4 (tools/vllm_inproc.sh build), with NeedleChain's sampling
# settings and a reasoning() output budget: S-RT en at 1000 tokens, depths 0 and 100, and one NeedleChain sample.
#   VLLM_INPROC_MODEL=.cache/smollm2-135m-hf-inproc .cache/vllm-inproc-venv/bin/opencompass tests/configs/e2e_vllm_inproc.py
_base_ = []

import os

from needlebench.opencompass.configs import SUMMARIZER, needlebench_datasets, needlechain_datasets, runtime
from needlebench.opencompass.models import reasoning, vllm_model, with_sampling
from needlebench.tasks.needlechain.task import NEEDLECHAIN_SAMPLING

_model = vllm_model(
    abbr="vllm-inproc-smollm2",
    path=os.environ["VLLM_INPROC_MODEL"],
    max_seq_len=4096,
    batch_size=8,
    # CPU engine settings: bf16 only where the CPU has bf16 instructions (the test decides), no CUDA graphs
    model_kwargs=dict(dtype=os.environ.get("VLLM_DTYPE", "auto"), enforce_eager=True),
)
# the output budget comes from reasoning(): the datasets below set none of their own
_model = reasoning(
    with_sampling(_model, **NEEDLECHAIN_SAMPLING), max_out_len=int(os.environ.get("VLLM_INPROC_OUT", "32"))
)
# no GPU to ask the runner for (vllm_model requests tensor_parallel_size GPUs)
_model["run_cfg"] = dict(num_gpus=0)
models = [_model]
datasets = needlebench_datasets(
    suite="4k", tasks=["srt"], langs=["en"], lengths=[1000], depths=[0, 100], repeats=1
) + needlechain_datasets(k_values=[5], points=1, variants=["forward"], questions=["single"])
infer, eval = runtime(num_shards=1, eval_workers=1)
summarizer = dict(type=SUMMARIZER)
