"""Provider batch files: an API model's pending requests written as OpenAI Batch JSONL, and the results read back.

Providers' batch APIs (and vLLM's ``run_batch``, offline) take a JSONL file of requests, one per line
(``custom_id``, ``method``, ``url``, ``body``), and return a JSONL file of results
(``custom_id``, ``response.status_code``, ``response.body``, ``error``). ``needlebench batch prepare``
runs the infer stage with a batch request to prepare (``request.BatchMode``): our API model
(``api.ResilientOpenAISDK``) builds every request through OpenCompass's own ``OpenAISDK`` and the
``openai`` client, exactly as online, but the client's transport keeps the request body instead of
sending it (:func:`capture_transport`), and the inferencer writes it as a batch line named by the
sample id; no prediction is written. ``needlebench batch collect`` matches the result lines to the
prepared ones (:func:`replay_table`: the request body's digest to its result) and runs the infer stage
again with a batch request to collect: the same requests are built and each one's transport
answers with its result (:func:`replay_transport`), so the prediction files, the failed requests
(a result line with an error, or none) and a resume are the online path's own.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..files import atomic_write
from ..jsonl import iter_jsonl, read_jsonl

__all__ = [
    "BATCH_URL",
    "batch_line",
    "body_digest",
    "capture_transport",
    "read_batch_results",
    "replay_table",
    "replay_transport",
    "write_table",
]

BATCH_URL = "/v1/chat/completions"
CAPTURED = "needlebench-batch-prepare"  # the placeholder answer of a captured request (never saved)


def body_digest(body: Any) -> str:
    """A request body's digest, independent of its keys' order (the key prepared and collected requests meet on).

    Args:
        body: the request body as parsed JSON.
    """
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


def batch_line(custom_id: str, body: Any) -> str:
    """One line of an OpenAI Batch input file.

    Args:
        custom_id: the sample id.
        body: the chat completion request body, as the online path sends it.
    """
    line = {"custom_id": custom_id, "method": "POST", "url": BATCH_URL, "body": body}
    return json.dumps(line, ensure_ascii=False) + "\n"


def capture_transport(keep: Callable[[Any], None]) -> Any:
    """An ``httpx`` transport that hands each request's JSON body to ``keep`` and answers a placeholder.

    Args:
        keep: takes the parsed body (called on the thread that sends the request).
    """
    import httpx

    def handle(request: Any) -> Any:
        keep(json.loads(request.content))
        return httpx.Response(200, json=_completion(CAPTURED))

    return httpx.MockTransport(handle)


def replay_transport(table: dict[str, dict[str, Any]]) -> Any:
    """An ``httpx`` transport that answers each request with its batch result (by :func:`body_digest`).

    A result that failed, or none, is a 400 the ``openai`` client does not retry: the request fails
    and is recorded as ``request_failed``, as online.

    Args:
        table: request digest -> ``{"status_code", "body"}`` or ``{"error"}`` (:func:`replay_table`).
    """
    import httpx

    def handle(request: Any) -> Any:
        found = table.get(body_digest(json.loads(request.content)))
        if found is None:
            return httpx.Response(400, json={"error": {"message": "no batch result for this request"}})
        if found.get("error") is not None or found.get("status_code") != 200:
            message = found.get("error") or f"batch result status {found.get('status_code')}: {found.get('body')}"
            return httpx.Response(400, json={"error": {"message": str(message)[:500]}})
        return httpx.Response(200, json=found["body"])

    return httpx.MockTransport(handle)


def _completion(text: str) -> dict[str, Any]:
    return {
        "id": "batch",
        "object": "chat.completion",
        "created": 0,
        "model": "batch",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
    }


def read_batch_results(paths: Iterable[Path]) -> dict[str, dict[str, Any]]:
    """Every result line of OpenAI Batch output (and error) files, by ``custom_id``.

    Args:
        paths: the result files.

    Raises:
        ConfigError: a missing file, a line that is not a batch result, or one ``custom_id`` twice.
    """
    out: dict[str, dict[str, Any]] = {}
    for path in paths:
        if not Path(path).is_file():
            raise ConfigError(f"batch collect: no such file {path}")
        for number, item in iter_jsonl(path):
            try:
                custom_id = str(item["custom_id"])
                response = item.get("response") or {}
                result = {
                    "status_code": response.get("status_code"),
                    "body": response.get("body"),
                    "error": item.get("error"),
                }
            except (KeyError, TypeError, AttributeError) as exc:
                raise ConfigError(f"{path}:{number}: not an OpenAI Batch result line ({exc})") from None
            if custom_id in out:
                raise ConfigError(f"{path}:{number}: custom_id {custom_id!r} has a result already")
            out[custom_id] = result
    return out


def replay_table(
    prepared: Path, results: dict[str, dict[str, Any]]
) -> tuple[dict[str, dict[str, Any]], dict[str, int]]:
    """A model's results by request digest, and the counts (``answered``, ``failed``, ``missing``, ``unknown``).

    Args:
        prepared: the model's folder of prepared batch files (``<run>/batch/<model>``).
        results: :func:`read_batch_results`'s lines.
    """
    table: dict[str, dict[str, Any]] = {}
    counts = {"answered": 0, "failed": 0, "missing": 0, "unknown": 0}
    seen: set[str] = set()
    for path in sorted(prepared.glob("*.jsonl")):
        for item in read_jsonl(path):
            seen.add(item["custom_id"])
            found = results.get(item["custom_id"])
            if found is None:
                counts["missing"] += 1
                continue
            ok = found.get("error") is None and found.get("status_code") == 200
            counts["answered" if ok else "failed"] += 1
            table[body_digest(item["body"])] = found
    counts["unknown"] = len(set(results) - seen)
    return table, counts


def write_table(path: Path, table: dict[str, dict[str, Any]]) -> None:
    """Keep a model's collected results where the infer stage reads them (atomically)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path) as tmp:
        tmp.write_text(json.dumps(table, ensure_ascii=False), encoding="utf-8")
