"""API keys: named by their environment variable, read per request, and never written into a run folder."""

from __future__ import annotations

import json
import logging
import os
import secrets
import subprocess
from pathlib import Path

import pytest
from conftest import OPENCOMPASS, ROOT, assert_linear, bin_path, free_port, start_flaky_server

from needlebench.runfolder.keys import (
    REDACTED,
    MissingKey,
    clear_keys,
    hidden_key_env,
    hide_keys,
    key_from_env,
    redact,
    scrub_file,
    scrub_text,
)

API = "needlebench.opencompass.api.ResilientOpenAISDK"


def test_redaction_finds_every_key_field_at_any_depth_and_replaces_each_whole(tmp_path: Path) -> None:
    model = {
        "type": "opencompass.models.OpenAISDK",
        "key": "sk-first",
        "keys": ["sk-second", "ENV"],
        "api_key": "sk-third",
        "http_client_cfg": {"headers": {"Authorization": "Bearer sk-fourth", "X-Api-Key": "sk-fifth"}},
        "extra_body": {"nested": [{"openai_api_key": "sk-sixth"}]},
        "path": "sk-looks-like-a-key-but-is-a-name",
    }
    found = clear_keys([model, {"key": "EMPTY"}, {"key": "ENV"}, {"key": ""}])
    assert sorted(found) == ["sk-fifth", "sk-first", "sk-fourth", "sk-second", "sk-sixth", "sk-third"]
    out = redact(model)
    assert out["key"] == REDACTED and out["keys"] == [REDACTED, "ENV"] and out["api_key"] == REDACTED
    assert out["http_client_cfg"]["headers"] == {"Authorization": f"Bearer {REDACTED}", "X-Api-Key": REDACTED}
    assert out["extra_body"]["nested"][0]["openai_api_key"] == REDACTED
    assert out["path"] == model["path"] and model["key"] == "sk-first"  # a copy; the rest as it was
    assert clear_keys(out) == []
    # in text and in a file (bytes, any form the key was written in), never a piece of it left
    quoted = 'sk-q"uote'
    text = "key='sk-first' " + json.dumps({"k": quoted}) + " sk-first!"
    assert (
        scrub_text(text, ["sk-first", quoted]) == f"key='{REDACTED}' " + '{"k": "' + REDACTED + '"} ' + f"{REDACTED}!"
    )
    blob = tmp_path / "blob.bin"
    blob.write_bytes(b"\x00\xffsk-first\x00")
    assert scrub_file(blob, ["sk-first"]) and blob.read_bytes() == b"\x00\xff" + REDACTED.encode() + b"\x00"
    assert not scrub_file(blob, ["sk-first"])  # nothing left: the file is not rewritten
    assert_linear(lambda t: scrub_text(t, ["sk-first"]), "ab sk-firs " * 2000, "ab sk-firs " * 16000, label="scrub")


def test_a_short_key_is_scrubbed_as_a_token_and_two_models_never_share_a_moved_key(tmp_path: Path) -> None:
    """A key under 8 characters is replaced where it stands alone, never inside a word of a log or a dump; two
    abbrs whose moved variables would coincide with different keys are refused, naming both."""
    from needlebench.errors import ConfigError
    from needlebench.runfolder.keys import hide_keys, scrub_file, scrub_text

    assert scrub_text("test_range=1; key='test'; latest test", ["test"]) == (
        "test_range=1; key='<redacted>'; latest <redacted>"
    )
    dump = tmp_path / "dump.py"
    dump.write_bytes(b"test_split='x'\nkey='test'\n\xff")
    assert scrub_file(dump, ["test"]) and dump.read_bytes() == b"test_split='x'\nkey='<redacted>'\n\xff"
    ours = "needlebench.opencompass.api.ResilientOpenAISDK"
    with pytest.raises(ConfigError, match=r"models 'gpt-4o' and 'gpt_4o' hold different API keys"):
        hide_keys(
            [
                {"type": ours, "abbr": "gpt-4o", "key": "sk-" + "a" * 20},
                {"type": ours, "abbr": "gpt_4o", "key": "sk-" + "b" * 20},
            ]
        )
    same = [{"type": ours, "abbr": a, "key": "sk-" + "a" * 20} for a in ("gpt-4o", "gpt_4o")]
    assert hide_keys(same) == {"NEEDLEBENCH_KEY_GPT_4O": "sk-" + "a" * 20}


def test_a_clear_key_moves_into_the_environment_and_the_variable_is_read_when_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ours = {"type": API, "abbr": "my api/model", "key": ["sk-a", "sk-b"]}
    theirs = {"type": "opencompass.models.OpenAISDK", "abbr": "oc", "key": "sk-c"}
    named = {"type": API, "abbr": "named", "key_env": "MY_KEY"}
    moved = hide_keys([ours, theirs, named])
    assert moved == {"NEEDLEBENCH_KEY_MY_API_MODEL": "sk-a,sk-b"} == {hidden_key_env("my api/model"): "sk-a,sk-b"}
    assert ours == {"type": API, "abbr": "my api/model", "key_env": "NEEDLEBENCH_KEY_MY_API_MODEL"}
    assert theirs["key"] == "sk-c" and named == {"type": API, "abbr": "named", "key_env": "MY_KEY"}
    monkeypatch.delenv("MY_KEY", raising=False)
    with pytest.raises(MissingKey, match=r"^model named: the environment variable MY_KEY .* is not set"):
        key_from_env("MY_KEY", "named")
    monkeypatch.setenv("MY_KEY", "k1, k2")
    assert key_from_env("MY_KEY", "named") == ["k1", "k2"]


def _server(port: int, log: Path, key: str) -> subprocess.Popen:
    return start_flaky_server(port, log, "--never-every", "0", "--faults-per-prompt", "0", "--require-key", key)


def _faults(log: Path) -> list[str]:
    return [json.loads(x)["fault"] for x in log.read_text().splitlines()] if log.exists() else []


def test_the_key_variable_is_read_per_request_not_when_the_model_is_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model is built with the variable unset (as a config loads before it is exported); its first request
    stops with one message naming the variable, as does the run's server check, and once set the same model's
    requests carry the key; a key the server refuses is named as such."""
    from needlebench.errors import ConfigError
    from needlebench.opencompass.api import ResilientOpenAISDK
    from needlebench.opencompass.models import api_model
    from needlebench.preflight.api_server import check_api_server

    canary = f"sk-canary-{secrets.token_hex(8)}"
    port, log = free_port(), tmp_path / "requests.jsonl"
    server = _server(port, log, canary)
    try:
        monkeypatch.delenv("NEEDLEBENCH_TEST_KEY", raising=False)
        model = ResilientOpenAISDK(
            key_env="NEEDLEBENCH_TEST_KEY",
            path="flaky",
            openai_api_base=f"http://127.0.0.1:{port}/v1",
            tokenizer_path="gpt-4",
            max_seq_len=4096,
            retry=1,
            timeout=10,
            query_per_second=50,
        )
        with pytest.raises(MissingKey, match="NEEDLEBENCH_TEST_KEY"):
            model.generate(["Say hi."], max_out_len=8)
        assert _faults(log) == []  # nothing was sent without it
        base = f"http://127.0.0.1:{port}/v1"
        config = api_model("keyed", "flaky", base, max_seq_len=4096, key_env="NEEDLEBENCH_TEST_KEY")
        assert "key" not in config and config["key_env"] == "NEEDLEBENCH_TEST_KEY"
        with pytest.raises(MissingKey, match="^model keyed: the environment variable NEEDLEBENCH_TEST_KEY"):
            check_api_server(config)  # the run's check before any prompt: one message, nothing sent
        assert _faults(log) == []
        monkeypatch.setenv("NEEDLEBENCH_TEST_KEY", canary)
        assert model.generate(["Say hi.", "Say bye."], max_out_len=8) == ["FLAKY_OK", "FLAKY_OK"]
        assert check_api_server(config)["models"] == ["flaky"]
        assert _faults(log) == ["ok", "ok"]
        seen: list[str] = []  # a server quoting the key it refused: the model's log never shows it
        handler = logging.Handler()
        handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
        model.logger.addHandler(handler)
        try:
            model.logger.error("Error code: 401 - {'message': 'Incorrect API key provided: %s'}", canary)
        finally:
            model.logger.removeHandler(handler)
        assert seen == [f"Error code: 401 - {{'message': 'Incorrect API key provided: {REDACTED}'}}"]
        monkeypatch.setenv("NEEDLEBENCH_TEST_KEY", "sk-wrong")
        with pytest.raises(ConfigError, match="rejected the API key .*key_env="):
            check_api_server(config)
        with pytest.raises(ConfigError, match="give key or key_env, not both"):
            api_model("keyed", "flaky", base, max_seq_len=4096, key="sk-x", key_env="NEEDLEBENCH_TEST_KEY")
    finally:
        server.terminate()
        server.wait(timeout=30)


USER_CONFIG = """_base_ = []
import os

from needlebench.opencompass.configs import SUMMARIZER, needlebench_datasets, runtime
from needlebench.opencompass.models import api_model, load_models

models = load_models(default={shipped!r}, env="NEEDLEBENCH_TEST_NO_MODELS") + [
    api_model(
        abbr="clear-key-model",
        model="flaky",
        tokenizer_path="gpt-4",  # the scripted server names none: OpenCompass's fallback, without its import
        base_url=os.environ["NEEDLEBENCH_API_BASE"],
        key={canary!r},  # in clear text, as a user may write it
        max_seq_len=8192,
        max_out_len=16,
        query_per_second=50,
        retry_passes=0,
    )
]
datasets = needlebench_datasets(suite="4k", tasks=["srt"], langs=["en"], lengths=[1000], depths=[0, 100], repeats=1)
# keep_tmp_file: OpenCompass's runner keeps each task's parameter file (tmp/ in the current folder), so it is checked too
infer, eval = runtime(num_shards=1, eval_workers=1, keep_tmp_file=True)
summarizer = dict(type=SUMMARIZER)
"""


def _holding(folder: Path, canary: bytes) -> list[str]:
    """Every file under ``folder`` (any file, read as bytes) that holds the canary."""
    return [str(p) for p in sorted(folder.rglob("*")) if p.is_file() and canary in p.read_bytes()]


@pytest.mark.e2e
@pytest.mark.parametrize("command", ["needlebench run", "opencompass"])
def test_no_key_lands_in_a_run_folder(tmp_path: Path, command: str) -> None:
    """A server that refuses any request without the canary key: the shipped API config (key in
    $NEEDLEBENCH_API_KEY) and a config holding the key in clear text both get every request answered, and the
    canary is in no file of the work dir, the task parameter files, the leaderboard folder or the output (the
    commands that read a run back, ``verify`` and ``leaderboard``, on the run whose dump was scrubbed).

    ``needlebench run`` moves the clear key out before OpenCompass dumps the config; the ``opencompass`` command
    dumps it first, and the partitioner scrubs the dump."""
    canary = f"sk-canary-{secrets.token_hex(12)}"
    port, log = free_port(), tmp_path / "requests.jsonl"
    config = tmp_path / "user_config.py"
    shipped = str(ROOT / "configs" / "models" / "api_openai_compatible.py")
    config.write_text(USER_CONFIG.format(shipped=shipped, canary=canary), encoding="utf-8")
    cwd, work, board = tmp_path / "cwd", tmp_path / "work", tmp_path / "board"
    cwd.mkdir()
    env = dict(
        os.environ,
        NEEDLEBENCH_API_BASE=f"http://127.0.0.1:{port}/v1",
        NEEDLEBENCH_API_MODEL="flaky",
        NEEDLEBENCH_API_TOKENIZER="gpt-4",
        NEEDLEBENCH_API_KEY=canary,
        NEEDLEBENCH_API_MAX_SEQ_LEN="8192",
        NEEDLEBENCH_API_MAX_OUT_LEN="16",
    )
    start = [*OPENCOMPASS] if command == "needlebench run" else [bin_path("opencompass")]
    server = _server(port, log, canary)
    try:
        done = subprocess.run(
            [*start, str(config), "-w", str(work)], cwd=cwd, env=env, capture_output=True, timeout=1200
        )
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert done.returncode == 0, (done.stdout[-3000:] + done.stderr[-3000:]).decode(errors="replace")
    (run,) = [p for p in work.iterdir() if p.is_dir()]
    assert _faults(log) == ["ok"] * 4  # two samples per model, each answered at its first request: no 401
    for model in ("api-model", "clear-key-model"):
        samples = [json.loads(x) for x in (run / "results" / model / "needlebench_srt_en_4k.samples.jsonl").open()]
        assert len(samples) == 2 and all(s["unscored"] is None and s["prediction"] == "FLAKY_OK" for s in samples)
    outputs = [done]
    if command == "opencompass":  # the commands that read the run back, on the run whose dump was scrubbed
        verified = subprocess.run(
            [bin_path("needlebench"), "verify", str(run / "summary" / "results.json"), str(run)],
            env=env,
            capture_output=True,
            timeout=300,
        )
        assert verified.returncode == 0, verified.stdout + verified.stderr
        ranked = subprocess.run(
            [bin_path("needlebench"), "leaderboard", str(run), "-o", str(board)],
            env=env,
            capture_output=True,
            timeout=300,
        )
        assert ranked.returncode == 0, ranked.stdout + ranked.stderr
        assert (board / "leaderboard.html").is_file()
        outputs += [verified, ranked]
    assert list((cwd / "tmp").glob("*_params.py"))
    secret = canary.encode()
    assert _holding(work, secret) == [] and _holding(cwd, secret) == [] and _holding(board, secret) == []
    for out in outputs:
        assert secret not in out.stdout + out.stderr
    (dump,) = (run / "configs").glob("*.py")
    text = dump.read_text(encoding="utf-8")
    assert "key_env='NEEDLEBENCH_API_KEY'" in text  # the shipped config names the variable
    if command == "needlebench run":  # moved out before the dump: the variable is named, nothing was redacted
        assert "key_env='NEEDLEBENCH_KEY_CLEAR_KEY_MODEL'" in text and REDACTED not in text
    else:  # dumped by OpenCompass before our code ran, scrubbed by the partitioner right after
        assert f"key='{REDACTED}'" in text
