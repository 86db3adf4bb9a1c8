"""A mistyped option is refused when the config is read, in one line naming the nearest valid option.

Where a builder hands its ``**kwargs`` on to a class that takes any keyword (OpenCompass's ``LocalRunner`` logs
and ignores them, its HuggingFace model logs them as unused), the check is against what the class reads: its
named parameters. The valid lists below are OpenCompass 0.5.4's (pinned).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from needlebench.errors import ConfigError, unknown_option_error
from needlebench.opencompass import models as m
from needlebench.opencompass.configs import needlebench_datasets, runtime
from needlebench.opencompass.partitioner import NeedleBenchPartitioner
from needlebench.tasks.needlechain.task import chain_options

RUNTIME_OWN = (
    "'adaptive', 'beyond_window', 'debug', 'eval_workers', 'keep_tmp_file', 'lark_bot_url', 'max_workers', "
    "'max_workers_per_gpu', 'measure_with_model_tokenizer', 'num_shards', 'overlength', 'prompts', 'runner', "
    "'template_margin'"
)
HF_VALID = (
    "'abbr', 'batch_padding', 'batch_size', 'fastchat_template', 'generation_kwargs', 'max_out_len', 'max_seq_len', "
    "'meta_template', 'min_out_len', 'mode', 'model_kwargs', 'num_gpus', 'pad_token_id', 'path', 'peft_kwargs', "
    "'peft_path', 'pred_postprocessor', 'rope', 'run_cfg', 'stop_words', 'summarizer_abbr', 'tokenizer_kwargs', "
    "'tokenizer_only', 'tokenizer_path', 'type'"
)
KVPRESS_VALID = HF_VALID.replace(
    "'batch_padding', 'batch_size', ", "'baseline', 'batch_padding', 'batch_size', 'compression_ratio', "
).replace("'pred_postprocessor', ", "'pred_postprocessor', 'press', 'press_kwargs', 'query', ")


def _refusal(make: Callable[[], Any]) -> str:
    with pytest.raises(ConfigError) as err:
        make()
    message = str(err.value)
    assert "\n" not in message
    return message


def test_the_issues_typos_name_the_nearest_option() -> None:
    assert _refusal(lambda: runtime(num_shard=8)) == (
        f"runtime: unknown option 'num_shard'; did you mean 'num_shards'? valid: [{RUNTIME_OWN}]"
    )
    assert _refusal(lambda: runtime(max_worker=2)) == (
        f"runtime: unknown option 'max_worker'; did you mean 'max_workers'? valid: [{RUNTIME_OWN}]"
    )
    assert _refusal(lambda: m.hf_model("x", "/models/x", 8192, max_out_lenn=3)) == (
        f"hf_model: unknown option 'max_out_lenn'; did you mean 'max_out_len'? valid: [{HF_VALID}]"
    )
    assert _refusal(lambda: m.kvpress_model("x", "/models/x", 8192, compresion_ratio=0.5)) == (
        f"kvpress_model: unknown option 'compresion_ratio'; did you mean 'compression_ratio'? valid: [{KVPRESS_VALID}]"
    )


def test_runner_options_are_what_the_runner_reads() -> None:
    """LocalRunner takes ``**kwargs`` and ignores them: a Slurm option given to it is refused, not dropped."""
    infer, evaluation = runtime(runner="SlurmRunner", partition="gpu", qos="high", retry=0, max_workers=3)
    assert infer["runner"] == {
        "type": "SlurmRunner",
        "max_num_workers": 3,
        "task": {"type": "needlebench.opencompass.infer_task.NeedleBenchInferTask"},
        "partition": "gpu",
        "qos": "high",
        "retry": 0,
    }
    assert (evaluation["runner"]["partition"], evaluation["runner"]["max_num_workers"]) == ("gpu", 4)
    assert runtime(debug=True, max_workers_per_gpu=2)[0]["runner"]["max_workers_per_gpu"] == 2
    assert _refusal(lambda: runtime(partition="gpu")) == f"runtime: unknown option 'partition'; valid: [{RUNTIME_OWN}]"
    assert _refusal(lambda: runtime(runner="SlurmRunner", partitoin="gpu")) == (
        "runtime: unknown option 'partitoin'; did you mean 'partition'? valid: ['adaptive', 'beyond_window', "
        "'debug', 'eval_workers', 'extra_command', 'lark_bot_url', 'max_workers', 'measure_with_model_tokenizer', "
        "'num_shards', 'overlength', 'partition', 'prompts', 'qos', 'quotatype', 'retry', 'runner', "
        "'template_margin']"
    )
    # runtime sets max_num_workers itself, from max_workers and eval_workers
    assert _refusal(lambda: runtime(max_num_workers=2)).startswith(
        "runtime: unknown option 'max_num_workers'; did you mean 'max_workers'? valid: ["
    )


def test_model_options_the_class_reads_still_pass() -> None:
    hf = m.hf_model(
        "x",
        "/models/x",
        8192,
        model_kwargs=dict(device_map="cpu"),
        tokenizer_kwargs=dict(trust_remote_code=True),
        generation_kwargs=dict(do_sample=False),
        stop_words=["<|im_end|>"],
        pad_token_id=2,
        meta_template=m.CHAT_META_TEMPLATE,
        pred_postprocessor=dict(type="my.post"),
    )
    assert (hf["tokenizer_kwargs"], hf["generation_kwargs"], hf["stop_words"], hf["pad_token_id"]) == (
        {"trust_remote_code": True},
        {"do_sample": False},
        ["<|im_end|>"],
        2,
    )
    assert (hf["model_kwargs"], hf["meta_template"]) == ({"device_map": "cpu"}, m.CHAT_META_TEMPLATE)
    press = m.kvpress_model(
        "x", "/models/x", 8192, press="SnapKVPress", compression_ratio=0.25, press_kwargs=dict(window_size=8)
    )
    assert press["kv_press"] == {
        "press": "SnapKVPress",
        "compression_ratio": 0.25,
        "query": "agnostic",
        "settings": {"window_size": 8},
    }


@pytest.mark.parametrize(
    ("make", "head"),
    [
        (
            lambda: m.smollm2_model(max_seqlen=3),
            "smollm2_model: unknown option 'max_seqlen'; did you mean 'max_seq_len'?",
        ),
        (
            lambda: m.vllm_model("x", "/models/x", 8192, gpu_memory_utilisation=0.5),
            "vllm_model: unknown option 'gpu_memory_utilisation'; did you mean 'gpu_memory_utilization'?",
        ),
        (
            lambda: m.lmdeploy_model("x", "/models/x", 8192, gen_cfg={}),
            "lmdeploy_model: unknown option 'gen_cfg'; did you mean 'gen_config'?",
        ),
        (
            lambda: m.api_model("x", "m", "http://127.0.0.1:1/v1", 8192, keyenv="K"),
            "api_model: unknown option 'keyenv'; did you mean 'key_env'?",
        ),
        (
            lambda: m.reasoning({}, max_out_lenn=3),
            "reasoning: unknown option 'max_out_lenn'; did you mean 'max_out_len'?",
        ),
        (lambda: m.with_sampling({}, 0.6, topp=0.9), "with_sampling: unknown option 'topp'; did you mean 'top_p'?"),
        (lambda: m.with_rope({}, rop=None), "with_rope: unknown option 'rop'; did you mean 'rope'?"),
        (
            lambda: m.rope_scaling("yarn", 2, original_max_position=8),
            "rope_scaling: unknown option 'original_max_position'; did you mean 'original_max_position_embeddings'?",
        ),
        (lambda: m.rope_sweep({}, factor=(1, 2)), "rope_sweep: unknown option 'factor'; did you mean 'factors'?"),
        (lambda: m.thinking_sweep({}, budget=(1,)), "thinking_sweep: unknown option 'budget'; did you mean 'budgets'?"),
        (
            lambda: m.kvpress_sweep({}, ["SnapKVPress"], ratio=[0.5]),
            "kvpress_sweep: unknown option 'ratio'; did you mean 'ratios'?",
        ),
    ],
)
def test_every_builder_and_helper_names_the_nearest(make: Callable[[], Any], head: str) -> None:
    assert _refusal(make).startswith(head + " valid: [")


def test_the_other_option_checks_say_it_the_same_way(tmp_path: Any) -> None:
    assert _refusal(lambda: needlebench_datasets(suite="4k", lenghts=[1000])).startswith(
        "task 'srt': unknown parameter 'lenghts'; did you mean 'lengths'? valid: ['answer_match', "
    )
    assert _refusal(lambda: needlebench_datasets(suite="4k", repeats={"srtt": 1})) == (
        "per-task setting: unknown task 'srtt'; did you mean 'srt'? valid: ['mrs', 'mrt', 'srt']"
    )
    assert _refusal(lambda: NeedleBenchPartitioner(out_dir=str(tmp_path), num_shard=2)).startswith(
        "partitioner: unknown option 'num_shard'; did you mean 'num_shards'? valid: ["
    )
    assert _refusal(lambda: chain_options(rooster="x")).startswith(
        "NeedleChain: unknown option 'rooster'; did you mean 'roster'? valid: ["
    )


def test_the_message_names_each_unknown_and_its_nearest() -> None:
    valid = ("max_workers", "num_shards")
    assert str(unknown_option_error("f", ["max_worker", "num_shard"], valid)) == (
        "f: unknown options 'max_worker', 'num_shard'; did you mean 'max_workers' (for 'max_worker'), "
        "'num_shards' (for 'num_shard')? valid: ['max_workers', 'num_shards']"
    )
    assert str(unknown_option_error("f", ["zzz", "num_shard"], valid)) == (
        "f: unknown options 'num_shard', 'zzz'; did you mean 'num_shards' (for 'num_shard')? "
        "valid: ['max_workers', 'num_shards']"
    )
    assert str(unknown_option_error("f", ["zzz"], valid, what="task")) == (
        "f: unknown task 'zzz'; valid: ['max_workers', 'num_shards']"
    )


def test_the_names_read_from_opencompass_source_are_its_classes_signatures() -> None:
    """``signatures.class_params`` reads a class's keyword parameters from OpenCompass's source without importing
    it; every runner and every model class a builder checks gives what ``inspect.signature`` of the imported
    class gives (named parameters, and whether it takes ``**kwargs``)."""
    import inspect

    import opencompass.models as oc_models
    import opencompass.runners as oc_runners

    from needlebench.opencompass.signatures import class_names, class_params

    runners = class_names("opencompass.runners", "Runner")
    assert {"LocalRunner", "SlurmRunner", "SlurmSequentialRunner", "DLCRunner", "VOLCRunner"} <= set(runners)
    models = ("HuggingFacewithChatTemplate", "VLLMwithChatTemplate", "TurboMindModelwithChatTemplate", "OpenAISDK")
    for package, module, names in (
        ("opencompass.runners", oc_runners, runners),
        ("opencompass.models", oc_models, models),
    ):
        for name in names:
            params = inspect.signature(getattr(module, name).__init__).parameters.values()
            named = frozenset(p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)) - {"self"}
            var_keyword = any(p.kind is p.VAR_KEYWORD for p in params)
            assert class_params(package, name) == (named, var_keyword), name
    assert class_params("opencompass.runners", "NoSuchRunner") is None
