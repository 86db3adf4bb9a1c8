"""One model input for every kind of model: our dataset templates render as OpenCompass's v2 templates do.

Both are rendered through OpenCompass's own prompt machinery, as its ``GenInferencer`` does it (the
``ZeroRetriever``, ``PromptTemplate.generate_item`` with the answer column emptied, then the model's template
parser in ``gen`` mode), for the two kinds of model OpenCompass has:

* a base model, without a meta template (``LMTemplateParser``: the turns joined by newlines). OpenCompass's
  v2 S-RT, M-RT and M-RS templates end with an answer turn (``{answer}\\n``), so its base models get the
  prompt followed by ``"\\n\\n"``;
* a chat model (``APITemplateParser`` with OpenCompass's default chat meta template, the one its
  HuggingFace, vLLM and LMDeploy chat-template models use): generation starts at the answer turn, so the
  model gets the bytes it got before the answer turn was added (the HUMAN turn, and the newline and empty
  turn that template's SYSTEM-as-HUMAN round adds), as do our API models (``api_model``'s meta template:
  the prompt alone, as they got it without one).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from needlebench.opencompass.configs import atc_datasets, check_raw_messages, needlebench_datasets, raw_messages
from needlebench.opencompass.models import CHAT_META_TEMPLATE, api_model
from needlebench.tasks import get_task, make_params

_FILES = {"srt": "single", "mrt": "multi_retrieval", "mrs": "multi_reasoning"}


def _oc_config(relative: str) -> Any:
    import opencompass
    from mmengine.config import Config

    return Config.fromfile(
        str(Path(opencompass.__file__).parent / "configs" / "datasets" / "needlebench_v2" / relative)
    )


def _oc_dataset(task: str) -> dict:
    """The first English dataset entry of OpenCompass's v2 4k config for a sparse task (ATC: its config)."""
    if task == "atc":
        return _oc_config("atc/atc_0shot_nocot_2_power_en.py")["needlebench_datasets"][0]
    cfg = _oc_config(f"needlebench_v2_4k/needlebench_v2_{_FILES[task]}_4k.py")
    key = "needlebench_2needle_en_datasets" if task == "mrs" else "needlebench_en_datasets"
    return cfg[key][0]


def _our_dataset(task: str) -> dict:
    if task == "atc":
        return atc_datasets(langs=["en"], needle_counts=[2], repeats=1)[0]
    return needlebench_datasets(suite="4k", tasks=[task], langs=["en"], lengths=[1000], depths=[50], repeats=1)[0]


def _row(task: str) -> dict[str, str]:
    """A real prompt of the task (ours; OpenCompass's are the same bytes: test_differential_prompts)."""
    extra = {"needle_counts": (2,)} if task == "atc" else {"lengths": (1000,), "depths": (50,)}
    sample = next(iter(get_task(task).generate(make_params(task, lang="en", repeats=1, **extra))))
    return {"prompt": sample.prompt, "answer": json.dumps(sample.gold)}


def _render(dataset: dict, row: dict[str, str], parser: Any) -> Any:
    """The model input OpenCompass's GenInferencer builds for the dataset's one row, with this template parser."""
    from datasets import Dataset, DatasetDict
    from opencompass.openicl.icl_dataset_reader import DatasetReader
    from opencompass.openicl.icl_inferencer import GenInferencer
    from opencompass.openicl.icl_prompt_template import PromptTemplate
    from opencompass.openicl.icl_raw_prompt_template import RawPromptTemplate
    from opencompass.openicl.icl_retriever import ZeroRetriever

    from needlebench.opencompass.instant import InstantModel

    reader_cfg = dataset["reader_cfg"]
    table = Dataset.from_dict({k: [v] for k, v in row.items()})
    reader = DatasetReader(
        DatasetDict(train=table, test=table), reader_cfg["input_columns"], reader_cfg["output_column"]
    )
    retriever = ZeroRetriever(type("Data", (), {"reader": reader, "train": table, "test": table})())
    cfg = dataset["infer_cfg"]["prompt_template"]
    if raw_messages(dataset):  # OpenCompass's RawPromptTemplate: the messages as its config gives them
        template = RawPromptTemplate(messages=[dict(m) for m in cfg["messages"]])
    else:
        template = PromptTemplate(template=cfg["template"])
    model = InstantModel()  # any OpenCompass model: the inferencer only asks it for its template parser
    model.template_parser = parser
    inferencer = GenInferencer(model=model, max_out_len=16)
    (prompt,) = inferencer.get_generation_prompt_list_from_retriever_indices(
        retriever.retrieve(), retriever, inferencer.gen_field_replace_token, prompt_template=template
    )
    return model.parse_template(prompt, mode="gen")


def _base_parser() -> Any:
    """OpenCompass's base models' parser: ``HuggingFaceBaseModel`` uses ``LMTemplateParser()``, no meta template."""
    from opencompass.models.base import LMTemplateParser

    return LMTemplateParser()


def _chat_parser(meta_template: dict | None = None) -> Any:
    """OpenCompass's chat-template models' parser (``_get_meta_template``: its default chat meta template)."""
    from opencompass.models.huggingface_above_v4_33 import _get_meta_template

    return _get_meta_template(meta_template)


@pytest.mark.parametrize("task", ["srt", "mrt", "mrs", "atc"])
def test_base_and_chat_models_get_opencompass_input(task: str) -> None:
    row = _row(task)
    ours, theirs = _our_dataset(task), _oc_dataset(task)
    base = _render(ours, row, _base_parser())
    assert base == _render(theirs, row, _base_parser())
    chat = _render(ours, row, _chat_parser())
    assert chat == _render(theirs, row, _chat_parser())
    # the chat model gets one user turn: the prompt and the newline OpenCompass's SYSTEM-as-HUMAN round
    # joins to it; the base model the prompt and, where OpenCompass's template has its answer turn (the
    # sparse tasks), the "\n\n" that turn leaves
    assert [dict(t) for t in chat] == [{"role": "HUMAN", "prompt": row["prompt"] + "\n"}]
    assert base == row["prompt"] + ("\n\n" if task != "atc" else "")
    # our API models: the prompt alone, as one user turn
    api = _render(ours, row, _chat_parser(api_model("m", "m", "http://x/v1", 8192)["meta_template"]))
    assert [dict(t) for t in api] == [{"role": "HUMAN", "prompt": row["prompt"]}]


@pytest.mark.parametrize("task", ["srt", "mrt", "mrs"])
def test_chat_models_keep_the_bytes_they_got_before_the_answer_turn(task: str) -> None:
    row = _row(task)
    ours = _our_dataset(task)
    before = json.loads(json.dumps(ours))  # the template as it was: the HUMAN turn alone
    before["infer_cfg"]["prompt_template"]["template"]["round"] = [dict(role="HUMAN", prompt="{prompt}")]
    for parser in (_chat_parser(), _chat_parser(CHAT_META_TEMPLATE)):
        assert _render(ours, row, parser) == _render(before, row, parser)
    # API models: the prompt they got without a meta template (the turns as one text), now as one user turn
    from opencompass.models.base_api import APITemplateParser

    (turn,) = _render(ours, row, _chat_parser(CHAT_META_TEMPLATE))
    assert turn["prompt"] == _render(before, row, APITemplateParser(None)) == row["prompt"]
    # base models: what changed, and only that
    assert _render(ours, row, _base_parser()) == _render(before, row, _base_parser()) + "\n\n"


def test_needlechain_system_turn_reaches_api_models_as_before() -> None:
    """NeedleChain (no OpenCompass counterpart) keeps its bytes on chat models: the system text sent as HUMAN,
    joined to the prompt by a newline, as an API model without a meta template got it before."""
    from needlebench.opencompass.configs import needlechain_datasets

    (dataset,) = needlechain_datasets(k_values=[5], points=1, variants=["forward"], questions=["single"])
    sample = next(iter(get_task("needlechain").generate(make_params("needlechain", **_chain_params(dataset)))))
    row = {"prompt": sample.prompt, "system": sample.system, "answer": "{}"}
    chat = _render(dataset, row, _chat_parser(CHAT_META_TEMPLATE))
    assert [dict(t) for t in chat] == [{"role": "HUMAN", "prompt": f"{sample.system}\n{sample.prompt}"}]
    from opencompass.models.base_api import APITemplateParser

    assert _render(dataset, row, APITemplateParser(None)) == f"{sample.system}\n{sample.prompt}"


def _chain_params(dataset: dict) -> dict:
    from needlebench.tasks import config_params

    return config_params(dataset)


# -- OpenCompass 0.5.4's raw-prompt configs (``needlebench_*_rawprompt.py``, v1) and ``template="raw"`` --------------

V1_SUITES = ("4k", "8k", "32k", "128k", "200k", "256k", "1000k")
# OpenCompass's API models' meta template (its configs/models/openai/*.py): HUMAN and BOT as API roles
_OC_API_META = dict(round=[dict(role="HUMAN", api_role="HUMAN"), dict(role="BOT", api_role="BOT", generate=True)])


def _oc_v1_config(suite: str, task: str, raw: bool) -> Any:
    return _oc_config(
        f"../needlebench/needlebench_{suite}/needlebench_{_FILES[task]}_{suite}{'_rawprompt' if raw else ''}.py"
    )


def _template_of(dataset: dict) -> dict:
    """A dataset's prompt template as data: its type's class name and its settings."""
    cfg = dict(dataset["infer_cfg"]["prompt_template"])
    kind = cfg.pop("type")
    return {"type": (kind if isinstance(kind, str) else kind.__name__).rsplit(".", 1)[-1], **cfg}


@pytest.mark.parametrize("suite", V1_SUITES)
def test_raw_template_is_opencompass_rawprompt_config(suite: str) -> None:
    """``template="raw"`` is the prompt template of every v1 ``*_rawprompt.py`` config of OpenCompass 0.5.4, and
    those configs differ from the ``PromptTemplate`` ones only there: the same dataset entries (loader, cells,
    buffers, repeats), so the rows are the bytes ``test_v1_sparse_prompts_match_opencompass`` proves."""
    for task in _FILES:
        raw, plain = _oc_v1_config(suite, task, True), _oc_v1_config(suite, task, False)
        keys = sorted(k for k in raw if k.endswith("_datasets"))
        assert keys == sorted(k for k in plain if k.endswith("_datasets")) and keys
        for key in keys:
            for theirs, before in zip(raw[key], plain[key], strict=True):
                assert {k: v for k, v in theirs.items() if k != "infer_cfg"} == {
                    k: v for k, v in before.items() if k != "infer_cfg"
                }
                assert {k: v for k, v in theirs["infer_cfg"].items() if k != "prompt_template"} == {
                    k: v for k, v in before["infer_cfg"].items() if k != "prompt_template"
                }
        (ours,) = needlebench_datasets(suite=suite, tasks=[task], langs=["en"], profile="v1", template="raw")
        assert raw_messages(ours) and raw_messages(raw[keys[0]][0]) and not raw_messages(plain[keys[0]][0])
        assert _template_of(ours) == _template_of(raw[keys[0]][0])  # RawPromptTemplate, one user message


def _v1_row(task: str, lang: str) -> dict[str, str]:
    """A real v1 prompt of the task (ours; OpenCompass's are the same bytes: test_differential_prompts)."""
    params = make_params(task, lang=lang, repeats=1, lengths=(1000,), depths=(50,), profile="v1")
    sample = next(iter(get_task(task).generate(params)))
    return {"prompt": sample.prompt, "answer": json.dumps(sample.gold)}


@pytest.mark.parametrize("task", ["srt", "mrt", "mrs"])
def test_raw_messages_reach_models_as_opencompass_sends_them(task: str) -> None:
    """Through OpenCompass's own machinery (GenInferencer's prompt, the model's template parser): an API model
    gets the one user message of OpenCompass's raw-prompt config, with our meta template and with OpenCompass's
    API one; its chat-template models fail on raw messages and its base models assert, so there a run is
    refused before any model call (``check_raw_messages``)."""
    from opencompass.models.base_api import APITemplateParser
    from opencompass.models.huggingface_above_v4_33 import _convert_chat_messages

    from needlebench.errors import ConfigError
    from needlebench.opencompass.models import hf_model, vllm_model

    for lang in ("en", "zh"):
        row = _v1_row(task, lang)
        (ours,) = needlebench_datasets(suite="4k", tasks=[task], langs=[lang], profile="v1", template="raw")
        key = {"mrs": f"needlebench_2needle_{lang}_datasets"}.get(task, f"needlebench_{lang}_datasets")
        theirs = _oc_v1_config("4k", task, True)[key][0]
        ours_api = api_model("m", "m", "http://x/v1", 8192)
        for parser in (_chat_parser(ours_api["meta_template"]), APITemplateParser(_OC_API_META), APITemplateParser()):
            sent = _render(ours, row, parser)
            assert sent == _render(theirs, row, parser) == [{"role": "user", "content": row["prompt"]}]
        check_raw_messages(ours_api, [ours])  # an API model takes them
        chat = _render(theirs, row, _chat_parser())  # what OpenCompass hands its chat-template models
        with pytest.raises(KeyError, match="prompt"):
            _convert_chat_messages([chat])
        with pytest.raises(AssertionError):
            _render(theirs, row, _base_parser())
        for local in (hf_model("m", "/models/m", 8192), vllm_model("m", "/models/m", 8192)):
            with pytest.raises(ConfigError, match="template='raw'"):
                check_raw_messages(local, [ours])


@pytest.mark.e2e
def test_raw_messages_request_body_equals_opencompass_api_model(tmp_path: Path) -> None:
    """The request body on the wire: OpenCompass's own ``OpenAISDK`` (its API meta template) given OpenCompass's
    raw-prompt config's rendering, and our ``api_model`` given ``template="raw"``'s, send the same messages to a
    local OpenAI-compatible server (it logs them as received)."""
    import subprocess
    import sys

    from conftest import ROOT, free_port, wait_healthy
    from opencompass.utils.build import build_model_from_cfg

    port, log = free_port(), tmp_path / "requests.jsonl"
    server = subprocess.Popen(
        [sys.executable, str(ROOT / "tools" / "flaky_server.py"), "--port", str(port), "--log", str(log)]
        + ["--never-every", "0", "--faults-per-prompt", "0", "--echo", "--log-messages", "--max-seconds", "300"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://127.0.0.1:{port}/v1"
    try:
        wait_healthy(port, server)
        ours_cfg = api_model("ours", "m", base, 8192, max_out_len=16, retry_passes=0)
        theirs_cfg = dict(
            type="opencompass.models.OpenAISDK", abbr="theirs", path="m", key="EMPTY", openai_api_base=base,
            meta_template=_OC_API_META, max_seq_len=8192, max_out_len=16, batch_size=1, retry=1, temperature=0.0,
            tokenizer_path="gpt-4",
        )  # fmt: skip
        sent = []
        for task in ("srt",):
            row = _v1_row(task, "en")
            (ours,) = needlebench_datasets(suite="4k", tasks=[task], langs=["en"], profile="v1", template="raw")
            key = "needlebench_2needle_en_datasets" if task == "mrs" else "needlebench_en_datasets"
            theirs = _oc_v1_config("4k", task, True)[key][0]
            for cfg, dataset in ((theirs_cfg, theirs), (ours_cfg, ours)):
                model = build_model_from_cfg(dict(cfg))
                rendered = _render(dataset, row, model.template_parser)
                model.generate_from_template([rendered], max_out_len=16)
                sent.append(row["prompt"])
    finally:
        server.terminate()
        server.wait(timeout=30)
    logged = [json.loads(line)["messages"] for line in log.read_text(encoding="utf-8").splitlines()]
    assert logged == [[{"role": "user", "content": prompt}] for prompt in sent]
