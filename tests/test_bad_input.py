"""Bad config values and files: one clear message naming the field or file."""

from __future__ import annotations

from pathlib import Path

import pytest

from needlebench.context.corpora import load_corpus
from needlebench.context.tokenizer import get_encoding
from needlebench.errors import ConfigError
from needlebench.opencompass.configs import needlebench_datasets
from needlebench.tasks import get_task, make_params
from needlebench.tasks.sparse.needles import load_needle_bank
from needlebench.tasks.sparse.retrieval import SparseParams, generate_srt


def _first(p: SparseParams) -> None:
    next(iter(generate_srt(p)))


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"lang": "fr"}, ["lang", "fr"]),
        ({"depths": (0, 101)}, ["depths", "101"]),
        ({"depths": (-5,)}, ["depths", "-5"]),
        # a length too short for the task's text: reference (only the needle must fit in the document)
        ({"lengths": (12,)}, ["lengths: 12 is too short"]),
        # clarified (the whole prompt must fit in the length, less its buffer)
        ({"lengths": (100,), "buffer": 100, "protocol": "clarified"}, ["lengths: 100 is too short"]),
        ({"lengths": (1000,), "buffer": -1}, ["buffer"]),
        ({"question_position": "middle"}, ["question_position"]),
        ({"repeats": 0}, ["repeats"]),
    ],
)
def test_bad_values_name_the_field(kwargs: dict, words: list[str]) -> None:
    base = {"lang": "en", "lengths": (1000,), "depths": (50,), "repeats": 1, "buffer": 100}
    with pytest.raises(ConfigError) as err:
        _first(SparseParams(**{**base, **kwargs}))
    for w in words:
        assert w in str(err.value)


@pytest.mark.parametrize(("protocol", "buffer"), [("reference", 100), ("clarified", 50)])
def test_length_at_most_buffer_shrinks_the_buffer_and_records_it(protocol: str, buffer: int) -> None:
    """Not an error by itself (OpenCompass's 128k suite has English 1k cells with a 3000 buffer).

    Reference: where the haystack would otherwise be empty, the buffer shrinks to OpenCompass's short-suite
    buffer (English 500, test_differential_prompts), or for a length shorter than that to half the length;
    clarified: to a quarter of the length.
    """
    p = SparseParams(lang="en", lengths=(200,), depths=(50,), repeats=1, buffer=200, protocol=protocol)
    (s,) = list(generate_srt(p))
    assert s.meta["buffer_requested"] == 200
    assert s.meta["buffer"] == buffer and s.meta["buffer_shrunk"] is True
    assert s.gold["needle"] in s.prompt
    if protocol == "reference":  # OpenCompass's origin.py: the length less the buffer less the needle with its newlines
        needle = len(get_encoding().encode(f"\n{s.gold['needle']}\n"))
        assert s.meta["haystack_tokens"] == 200 - buffer - needle == 78
    else:  # clarified: the whole prompt within the length less the buffer, some haystack in it
        assert s.meta["prompt_tokens"] <= 200 - buffer and s.meta["haystack_tokens"] > 0


def test_missing_corpus_file_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nope.jsonl"
    with pytest.raises(ConfigError, match="nope.jsonl"):
        load_corpus("en", str(missing))
    with pytest.raises(ConfigError, match="corpus"):
        _first(SparseParams(lang="en", lengths=(1000,), depths=(50,), repeats=1, corpus=str(missing)))


def test_a_corpus_file_that_is_not_utf8_or_not_text_records_is_named(tmp_path: Path) -> None:
    """A JSONL corpus is read by the one JSONL reader, strictly: bytes that are not UTF-8 are an error naming the
    file, never a haystack of U+FFFD; a line without its text is named too."""
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b'{"text": "ok"}\n{"text": "\xff\xfe"}\n')
    with pytest.raises(ConfigError, match=r"binary.jsonl:2: not a JSON line \('utf-8' codec can't decode"):
        load_corpus("en", str(binary))
    wrong = tmp_path / "wrong.jsonl"
    wrong.write_text('{"text": "ok"}\n{"body": "no text"}\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"wrong.jsonl must hold one \{'text': ...\} object a line"):
        load_corpus("en", str(wrong))


def test_unreadable_needle_file_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "needles.jsonl"
    bad.write_text('{"id": "x", "lang": "en", "needle": "n"}\nnot json\n')
    with pytest.raises(ConfigError, match=r"needles.jsonl line 1"):
        load_needle_bank(str(bad))
    with pytest.raises(ConfigError, match="needle_file"):
        load_needle_bank(str(tmp_path / "absent.jsonl"))
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b"\xff\xfe\xfa")
    with pytest.raises(ConfigError, match="binary.jsonl"):
        load_needle_bank(str(binary))


def test_unknown_names_list_the_choices() -> None:
    with pytest.raises(ConfigError, match="choose from"):
        get_task("srtx")
    with pytest.raises(ConfigError, match="unknown parameter"):
        make_params("srt", lang="en", lengths=[1000], depths=[0], colour="red")
    with pytest.raises(ConfigError, match="suite"):
        needlebench_datasets(suite="64k")
    with pytest.raises(ConfigError, match="langs"):
        needlebench_datasets(suite="4k", langs=["de"])
    with pytest.raises(ConfigError, match="tasks"):
        needlebench_datasets(suite="4k", tasks=["atcx"])


def test_opencompass_needle_format_is_accepted(tmp_path: Path) -> None:
    f = tmp_path / "needles.jsonl"
    f.write_text(
        '{"needle": "Hidden on Emerald Island is the Amber Lamp.", "retrieval_question": '
        "\"What is hidden on Emerald Island? Please answer in the format 'Hidden on Emerald Island is ______.'\", "
        '"arg1": "Emerald Island", "arg2": "Amber Lamp", "language": "English"}\n'
    )
    bank = load_needle_bank(str(f))
    (n,) = bank.for_lang("en")
    assert n.keywords == ("Amber Lamp",) and n.answer_format.startswith("Hidden on Emerald")


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"protocol": "paper"}, ["protocol", "paper", "reference", "clarified"]),
        ({"prompt_style": "fancy"}, ["prompt_style", "fancy", "clarified"]),
        ({"placement": "random"}, ["placement", "random", "spread"]),
        ({"mtr": {"num_needles": [3]}}, ["mtr"]),
        ({"srt": {"num_needle": [3]}}, ["num_needle"]),
        ({"profile": "v3"}, ["profile", "v3"]),
    ],
)
def test_protocol_and_option_typos_fail_when_the_config_is_read(kwargs: dict, words: list[str]) -> None:
    from needlebench.opencompass.configs import needlebench_datasets

    with pytest.raises(ConfigError) as err:
        needlebench_datasets(suite="4k", **kwargs)
    assert all(w in str(err.value) for w in words), str(err.value)


def test_options_given_once_reach_every_task() -> None:
    from needlebench.opencompass.configs import atc_datasets, needlebench_datasets, needlechain_datasets

    for d in needlebench_datasets(suite="4k", num_needles=[3], prompt_style="clarified"):
        assert d["num_needles"] == [3] and d["prompt_style"] == "clarified"
    with pytest.raises(ConfigError, match="roster"):
        needlechain_datasets(quick=True, roster="alphabetical")
    with pytest.raises(ConfigError, match="answer_match"):
        atc_datasets(answer_match="fuzzy")


def test_runner_and_model_option_typos_name_the_valid_ones() -> None:
    from needlebench.opencompass.configs import runtime
    from needlebench.opencompass.models import api_model, lmdeploy_model, vllm_model

    with pytest.raises(ConfigError, match="partiton.*partition"):
        runtime(runner="SlurmRunner", partiton="debug")
    with pytest.raises(ConfigError, match="unknown runner"):
        runtime(runner="SlurmRunnr")
    with pytest.raises(ConfigError, match="chat_template_kwarg"):
        vllm_model("v", "/m", 8192, chat_template_kwarg={})
    with pytest.raises(ConfigError, match="backnd"):
        lmdeploy_model("l", "/m", 8192, backnd="pytorch")
    with pytest.raises(ConfigError, match="extra_bdy"):
        api_model("a", "m", "http://127.0.0.1:1/v1", 8192, extra_bdy={})
    assert vllm_model("v", "/m", 8192, stop_words=["<|end|>"])["stop_words"] == ["<|end|>"]
    assert runtime(runner="SlurmRunner", partition="debug")[0]["runner"]["partition"] == "debug"


# -- a server that is down, serves another model, or holds fewer tokens ------------------------
@pytest.fixture
def listing_server(tmp_path: Path):
    """The fault-injecting stand-in, here only for its ``/v1/models``: serves 'flaky' with 4096 tokens."""
    import subprocess
    import sys

    from conftest import ROOT, free_port, wait_healthy

    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "tools" / "flaky_server.py"), "--port", str(port)]
        + ["--log", str(tmp_path / "requests.jsonl"), "--max-model-len", "4096"]
    )
    try:
        wait_healthy(port, proc, seconds=60)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_server_preflight_names_what_is_wrong(listing_server: str) -> None:
    from conftest import free_port

    from needlebench.opencompass.models import api_model
    from needlebench.preflight.api_server import check_api_server

    ok = api_model("a", "flaky", listing_server, max_seq_len=4096)
    assert check_api_server(ok) == {"models": ["flaky"], "max_model_len": 4096}
    with pytest.raises(ConfigError, match=r"does not serve 'flaki'; it serves \['flaky'\]"):
        check_api_server(api_model("a", "flaki", listing_server, max_seq_len=4096))
    with pytest.raises(ConfigError, match="max_seq_len=8192 but .* context of 4096 tokens.*Set max_seq_len=4096"):
        check_api_server(api_model("a", "flaky", listing_server, max_seq_len=8192))
    dead = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(ConfigError, match=f"cannot reach the server at {dead}.*Nothing was sent"):
        check_api_server(api_model("a", "flaky", dead, max_seq_len=4096))


@pytest.mark.e2e
def test_opencompass_against_a_dead_server_stops_before_inference(tmp_path: Path) -> None:
    """One message from the partitioner, no inference task started, no prediction written."""
    import os
    import subprocess

    from conftest import OPENCOMPASS, ROOT, free_port

    dead = f"http://127.0.0.1:{free_port()}/v1"
    r = subprocess.run(
        [*OPENCOMPASS, "tests/configs/e2e_flaky.py", "-w", str(tmp_path)],
        cwd=ROOT,
        env={**os.environ, "NEEDLEBENCH_API_BASE": dead},
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = r.stdout + r.stderr
    assert r.returncode != 0
    # the partitioner's one message (a SystemExit naming it, as for a full disk or a changed plan), no traceback
    assert f"needlebench: model api-model: cannot reach the server at {dead}" in out
    assert "Traceback" not in out
    assert not list(tmp_path.rglob("predictions/*/*.json"))
    assert "OpenICLInfer" not in out  # no inference task was launched


_LAZY_CONFIGS = {
    "bad_value": ('datasets = needlebench_datasets(suite="5k")\n', ["suite", "'5k'", "_base_ = []"]),
    "lang_for_langs": ('datasets = needlebench_datasets(suite="4k", lang=["en"])\n', ["langs=", "_base_ = []"]),
    "good_but_lazy": ('datasets = needlebench_datasets(suite="4k", tasks=["srt"])\n', ["_base_ = []", "lazily"]),
}


@pytest.mark.parametrize("case", sorted(_LAZY_CONFIGS))
def test_a_config_without_base_names_the_cause(tmp_path: Path, case: str) -> None:
    """mmengine parses a config without ``_base_`` lazily: every call fails with a bare RuntimeError().
    Our commands name the missing line, and the ConfigError underneath when there is one."""
    from needlebench.opencompass.configs import load_config

    body, words = _LAZY_CONFIGS[case]
    path = tmp_path / f"{case}.py"
    path.write_text("from needlebench.opencompass.configs import needlebench_datasets\n\n" + body, encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_config(str(path))
    assert all(w in str(err.value) for w in words), str(err.value)
    fixed = tmp_path / f"{case}_fixed.py"
    fixed.write_text("_base_ = []\n" + path.read_text(encoding="utf-8"), encoding="utf-8")
    if case == "good_but_lazy":
        assert load_config(str(fixed))[1]  # the same file with the line loads
    else:
        with pytest.raises(ConfigError) as err:
            load_config(str(fixed))
        assert "_base_" not in str(err.value) and words[0] in str(err.value)


def test_needlebench_plan_prints_the_cause_of_a_lazy_config(tmp_path: Path) -> None:
    import subprocess

    from conftest import ROOT, bin_path

    path = tmp_path / "mine.py"
    path.write_text(
        'from needlebench.opencompass.configs import needlebench_datasets\n\ndatasets = needlebench_datasets(suite="5k")\n'
    )
    r = subprocess.run([bin_path("needlebench"), "plan", str(path)], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode != 0 and "unknown suite '5k'" in r.stderr and "_base_ = []" in r.stderr, r.stderr


def test_per_task_options_replace_suite_values() -> None:
    """``mrt=dict(depths=[...])`` gives M-RT its own depth list; the other tasks keep the suite's."""
    srt, mrt = needlebench_datasets(suite="4k", tasks=["srt", "mrt"], langs=["en"], mrt=dict(depths=[0, 100]))
    assert mrt["depths"] == [0, 100] and srt["depths"] != [0, 100]
