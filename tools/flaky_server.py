"""A fault-injecting OpenAI-compatible server on 127.0.0.1, for reliability tests.

Each prompt (keyed by a hash of its messages) first meets faults, then an
answer: HTTP 500 / 503, 429 with ``Retry-After``, a response slower than the
client's timeout, a reset connection, truncated JSON, empty content, or a
slow trickle of a good response. With ``--reasoning`` a good response carries
``reasoning_content`` apart from the answer, as a server with a reasoning parser
returns it, and one prompt in three runs out of budget while reasoning
(:func:`reasoned`; each answer's parts are logged). With ``--echo`` the good response is
``FLAKY_OK`` followed by the prompt's last message, which holds the needle,
so every answered sample scores 100 and a failed request that a summary
averaged in as 0 would show. With ``--hostile SCRIPT`` each prompt is answered as the script (a JSON file:
the SHA-256 of the prompt's last message -> ``{"gold": text, "kind": name}``) says: its gold text, then the
hostile text of :data:`HOSTILE` ``kind``, written into the response body as raw bytes (invalid UTF-8 and
lone-surrogate escapes included), and logged in base64 as sent (:func:`hostile_content`). Prompts whose hash falls in the
``--never-every`` class fail every time (with ``--fail-first N``, their first N requests). Which prompt gets which fault is a
pure function of the prompt, so a rerun meets the same faults. Every request
and its fault are appended to ``--log`` (JSON lines; with ``--log-messages``, the messages as sent). The server is bounded:
it stops after ``--max-requests`` requests or ``--max-seconds`` seconds. With ``--require-key KEY`` every
request but ``/health`` without ``Authorization: Bearer KEY`` is refused with 401 (logged as fault
``unauthorized``, the key it was sent never logged nor quoted). With ``--latency S`` every chat request
takes S seconds (a slow server, for watching a run's progress).

    python tools/flaky_server.py --port 8799 --log /tmp/requests.jsonl
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FAULTS = ("http_500", "http_503", "http_429", "timeout", "reset", "truncated_json", "empty_content", "slow_stream")
ANSWER = "FLAKY_OK"


def plan(key: str, attempt: int, never_every: int, faults_per_prompt: int, fail_first: int = 0) -> str:
    """The fault (or ``"ok"``) a prompt meets on its ``attempt``-th request.

    A prompt of the ``never_every`` class fails every request, or with ``fail_first`` only its first that
    many (a server down for a while for some prompts)."""
    h = int(hashlib.sha256(key.encode()).hexdigest(), 16)
    if never_every and h % never_every == 0 and fail_first:
        return "http_500" if attempt < fail_first else "ok"
    if never_every and h % never_every == 0:
        hard = ("http_500", "http_503", "http_429", "reset", "truncated_json", "empty_content")
        return hard[(h + attempt) % len(hard)]
    if attempt < faults_per_prompt:
        return FAULTS[(h // 7 + attempt) % len(FAULTS)]
    return "ok"


def _completion(
    content: str,
    finish: str | None = "stop",
    reasoning: str | None = None,
    tokens: int = 1,
    reasoning_tokens: int | None = None,
    cost: dict[str, Any] | None = None,
) -> bytes:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning is not None:  # as a server with a reasoning parser returns it (vLLM, SGLang, DeepSeek's API)
        message["reasoning_content"] = reasoning
    body = {
        "id": f"chatcmpl-{time.time_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": "flaky",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 1, "completion_tokens": tokens, "total_tokens": tokens + 1},
    }
    if reasoning_tokens is not None:  # as vLLM and OpenAI report them
        body["usage"]["completion_tokens_details"] = {"reasoning_tokens": reasoning_tokens}
    if cost is not None:  # --costs: as vLLM reports them with its two flags on
        body["usage"].update(prompt_tokens=cost["prompt_tokens"], total_tokens=cost["prompt_tokens"] + tokens)
        body["usage"]["prompt_tokens_details"] = {"cached_tokens": cost["cached_tokens"]}
        body["metrics"] = {k: cost[k] for k in ("queue_time_ms", "time_to_first_token_ms", "generation_time_ms")}
    return json.dumps(body).encode()


def costed(digest: str) -> dict[str, Any]:
    """``--costs``: what a prompt's answer says it cost, fixed by the prompt (its digest), logged with it: prompt
    and cached tokens (``usage``) and vLLM's per-request ``metrics``."""
    h = int(digest[:12], 16)
    prompt = 100 + h % 900
    return {
        "prompt_tokens": prompt,
        "cached_tokens": (h >> 12) % (prompt + 1),
        "queue_time_ms": (h % 13) / 8,
        "time_to_first_token_ms": 1 + (h % 97) / 4,
        "generation_time_ms": 5.0 + h % 31,
    }


# --hostile: what a model may write, as the bytes between the quotes of the response's JSON "content" string, so
# that what no json.dumps writes reaches the client too (invalid UTF-8, lone surrogates as escapes). Each text
# tries to set window.__pwned, inject an element or break out of a script block, a template, a terminal.
_MARKUP = (
    "</script><script>window.__pwned=1</script><!--<script>window.__pwned=2</script>-->"
    '<img src=x onerror="window.__pwned=3"><svg onload="window.__pwned=4"></svg><b id="nb-injected">bold</b>'
    "</textarea></style><style>body{display:none}</style>]]>"
)


def _json_text(text: str) -> bytes:
    """``text`` as it sits inside a JSON string: control characters escaped, U+2028 and the rest raw UTF-8."""
    return json.dumps(text, ensure_ascii=False)[1:-1].encode("utf-8")


HOSTILE: dict[str, bytes] = {
    "line_breaks": _json_text("ls\u2028ps\u2029vt\x0bff\x0cfs\x1cgs\x1drs\x1enel\x85cr\rcrlf\r\nlf\nend"),
    "nul": _json_text("nul\x00inside\x00\x00end"),
    "lone_surrogates": b"lone \\ud800 high, \\udfff low, \\udc00\\ud800 reversed",
    "invalid_utf8": b"bad \xff\xfe bytes \xc3\x28 overlong \xc0\xaf surrogate \xed\xa0\x80 cut \xe4\xb8",
    "huge": _json_text(("<i>huge</i> \u2028 {{x}} \x1b[1m" * 40_000)[:1_000_000]),
    "markup": _json_text(_MARKUP),
    "template": _json_text(
        "{{ constructor.constructor('window.__pwned=5')() }} ${window.__pwned=6} {% raw %}{{7*7}}{% endraw %} "
        "<%= 7*7 %> #{7*7} @{x}"
    ),
    "ansi": _json_text("\x1b[31mred\x1b[0m \x1b]0;title\x07 \x1b[2J\x1b[Hcleared \x9b31m csi \x1bc reset"),
}


def hostile_content(gold: str, kind: str) -> bytes:
    """The JSON string body (between its quotes) of a ``--hostile`` answer: ``gold`` (may be empty), then the
    hostile text ``kind``, separated by a space so neither runs into the other.

    Args:
        gold: the sample's correct answer, or "" for the hostile text alone.
        kind: a key of :data:`HOSTILE`.
    """
    return (_json_text(gold + " ") if gold else b"") + HOSTILE[kind]


def _hostile_completion(content: bytes) -> bytes:
    """A chat completion whose ``content`` string holds ``content``'s bytes exactly (they need not be UTF-8)."""
    marker = "@@CONTENT@@"
    return _completion(marker).replace(marker.encode(), content, 1)


REASONING = "Let me look for the sentence the question asks about, then check it once more. "


DECOY = "I could not find it in the document."


def reasoned(key: str, answer: str) -> tuple[str, str, str, int]:
    """(reasoning, content, finish reason, completion tokens) of a ``--reasoning`` answer.

    One prompt in three runs out of budget while reasoning: its reasoning stops mid-way, its content is
    empty and its finish reason ``length``; one in six is a decoy: the answer only in the reasoning, the
    content :data:`DECOY`; the others reason, then answer. The token count is the
    reasoning's and the answer's words (not a tokenizer's count, so a record that counted the text
    itself would differ from it)."""
    h = int(hashlib.sha256(key.encode()).hexdigest(), 16)
    steps = 2 + h % 4
    if h % 3 == 0:
        reasoning = (REASONING * steps)[: 40 * steps]
        return reasoning, "", "length", len(reasoning.split())
    if h % 6 == 1:  # a decoy: the answer (with the gold, under --echo) only in the reasoning
        reasoning = REASONING * steps + answer
        return reasoning, DECOY, "stop", len(reasoning.split()) + len(DECOY.split())
    reasoning = REASONING * steps
    return reasoning, answer, "stop", len(reasoning.split()) + len(answer.split())


def thought(key: str, answer: str, budget: int | None, mode: str) -> tuple[str, str, int, int]:
    """(reasoning, content, completion tokens, reasoning tokens) of a ``--thinking`` answer.

    The model would reason 20 to 59 words (one word = one token here), then answer. ``honour``: a budget in
    the request (vLLM's ``thinking_token_budget``) ends the reasoning at that many words; ``ignore``: the
    budget is accepted and has no effect, as a server whose template drops it."""
    h = int(hashlib.sha256(key.encode()).hexdigest(), 16)
    words = (REASONING.split() * 10)[: 20 + h % 40]
    if mode == "honour" and budget is not None:
        words = words[:budget]
    reasoning = " ".join(words)
    return reasoning, answer, len(words) + len(answer.split()), len(words)


def make_handler(args: argparse.Namespace, state: dict[str, Any]) -> type[BaseHTTPRequestHandler]:
    lock = threading.Lock()
    listing: dict[str, Any] = {"id": "flaky", "object": "model"}
    if args.max_model_len:
        listing["max_model_len"] = args.max_model_len  # as vLLM reports its --max-model-len

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a: Any) -> None:  # quiet
            pass

        def _send(self, code: int, data: bytes, headers: dict[str, str] | None = None) -> None:
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def _refused(self) -> bool:
            """With ``--require-key``: a request without the key is answered 401 (and logged); True if it was."""
            if not args.require_key or self.headers.get("Authorization") == f"Bearer {args.require_key}":
                return False
            with lock, open(args.log, "a", encoding="utf-8") as fh:
                fh.write(json.dumps({"path": self.path, "fault": "unauthorized"}) + "\n")
            self._send(401, b'{"error": {"message": "invalid API key", "type": "invalid_request_error"}}')
            return True

        def do_GET(self) -> None:
            if self.path.rstrip("/") not in ("/health", "/version") and self._refused():
                return
            if self.path.rstrip("/") == "/health":
                self._send(200, b'{"status": "ok"}')
            elif self.path.rstrip("/") == "/version":  # as vLLM's, open without the key
                self._send(200, b'{"version": "flaky-1"}')
            elif self.path.rstrip("/") == "/v1/models":
                self._send(200, json.dumps({"object": "list", "data": [listing]}).encode())
            else:
                self._send(404, b'{"error": {"message": "not found"}}')

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if self._refused():
                return
            try:
                req = json.loads(raw)
                key = json.dumps(req["messages"], sort_keys=True)
            except (ValueError, KeyError, TypeError):
                self._send(400, b'{"error": {"message": "bad request"}}')
                return
            answer = ANSWER
            if args.latency:
                time.sleep(args.latency)  # a slow server: every request takes this long
            if args.hostile:
                self._hostile(req, key)
                return
            budget = req.get("thinking_token_budget")
            if args.thinking == "reject" and budget is not None:  # vLLM without a reasoning parser
                self._send(
                    400,
                    b'{"error": {"message": "thinking_token_budget is set but reasoning_config is not configured. '
                    b'Please set --reasoning-parser and/or --reasoning-config to use thinking_token_budget."}}',
                )
                return
            if args.echo and req["messages"]:
                answer = f"{ANSWER}\n{req['messages'][-1].get('content', '')}"
            with lock:
                attempt = state["attempts"].get(key, 0)
                state["attempts"][key] = attempt + 1
                state["requests"] += 1
                fault = plan(key, attempt, args.never_every, args.faults_per_prompt, args.fail_first)
                digest = hashlib.sha256(key.encode()).hexdigest()[:16]
                entry: dict[str, Any] = {"prompt": digest, "attempt": attempt, "fault": fault}
                if args.log_messages:
                    entry["messages"] = req["messages"]
                if args.costs and fault == "ok":
                    entry["cost"] = costed(digest)
                if not ((args.reasoning or args.thinking) and fault == "ok"):  # logged with its parts below
                    with open(args.log, "a", encoding="utf-8") as fh:
                        fh.write(json.dumps(entry, ensure_ascii=False) + "\n")
            if fault == "ok" and args.thinking:
                reasoning, content, tokens, thinking = thought(key, answer, budget, args.thinking)
                entry.update(budget=budget, reasoning_tokens=thinking)
                with lock, open(args.log, "a", encoding="utf-8") as fh:
                    fh.write(json.dumps(entry, ensure_ascii=False) + "\n")
                self._send(200, _completion(content, "stop", reasoning, tokens, thinking))
            elif fault == "ok" and args.reasoning:
                reasoning, content, finish, tokens = reasoned(key, answer)
                entry.update(reasoning=reasoning, content=content, finish=finish, completion_tokens=tokens)
                with lock, open(args.log, "a", encoding="utf-8") as fh:
                    fh.write(json.dumps(entry, ensure_ascii=False) + "\n")
                self._send(200, _completion(content, finish, reasoning, tokens))
            elif fault == "ok":
                self._send(200, _completion(answer, cost=entry.get("cost")))
            elif fault in ("http_500", "http_503"):
                self._send(int(fault[-3:]), b'{"error": {"message": "injected server error"}}')
            elif fault == "http_429":
                self._send(429, b'{"error": {"message": "injected rate limit"}}', {"Retry-After": "1"})
            elif fault == "timeout":
                time.sleep(args.timeout_sleep)  # longer than the client's timeout; bounded
                self._send(200, _completion(answer))
            elif fault == "reset":
                self.close_connection = True
                self.connection.shutdown(2)
            elif fault == "truncated_json":
                data = _completion(answer)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data[: len(data) // 2])
                self.close_connection = True
                self.connection.shutdown(2)
            elif fault == "empty_content":
                self._send(200, _completion("", finish=None, tokens=0))  # a glitch; no text, "length": an answer
            else:  # slow_stream: the good answer, a few bytes at a time
                data = _completion(answer)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                step = max(1, len(data) // 10)
                for i in range(0, len(data), step):
                    self.wfile.write(data[i : i + step])
                    self.wfile.flush()
                    time.sleep(0.1)

        def _hostile(self, req: dict[str, Any], key: str) -> None:
            """Answer as the ``--hostile`` script says, or 404 for a prompt it does not hold (never a guess)."""
            text = str(req["messages"][-1].get("content", "")) if req["messages"] else ""
            digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
            step = state["script"].get(digest)
            content = hostile_content(step["gold"], step["kind"]) if step else b""
            entry: dict[str, Any] = {"prompt": hashlib.sha256(key.encode()).hexdigest()[:16], "fault": "ok"}
            entry.update(sha256=digest, scripted=step is not None, kind=step and step["kind"])
            entry["content_b64"] = base64.b64encode(content).decode("ascii")
            with lock, open(args.log, "a", encoding="utf-8") as fh:
                state["requests"] += 1
                fh.write(json.dumps(entry) + "\n")
            if step is None:
                self._send(404, b'{"error": {"message": "prompt not in the --hostile script"}}')
            else:
                self._send(200, _hostile_completion(content))

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=8799)
    parser.add_argument("--log", required=True, help="append each request and its fault here (JSON lines)")
    parser.add_argument("--never-every", type=int, default=5, help="1 in N prompts never succeeds (0: none)")
    parser.add_argument("--faults-per-prompt", type=int, default=2, help="faults before a prompt's first answer")
    parser.add_argument(
        "--fail-first", type=int, default=0, help="the --never-every prompts fail only their first N requests (0: all)"
    )
    parser.add_argument("--latency", type=float, default=0.0, help="seconds every chat request takes (a slow server)")
    parser.add_argument("--timeout-sleep", type=float, default=4.0, help="seconds a 'timeout' fault waits")
    parser.add_argument("--max-model-len", type=int, default=0, help="reported in /v1/models (0: not reported)")
    parser.add_argument("--echo", action="store_true", help="answer FLAKY_OK, a newline, then the last message")
    parser.add_argument("--log-messages", action="store_true", help="log each request's messages as sent")
    parser.add_argument(
        "--reasoning", action="store_true", help="answer with reasoning_content apart (reasoned(): 1 in 3 runs out)"
    )
    parser.add_argument(
        "--require-key", default="", help="refuse (401) any request without 'Authorization: Bearer KEY' (not /health)"
    )
    parser.add_argument(
        "--hostile", default="", help="answer each prompt as this JSON script says: gold, then a HOSTILE text"
    )
    parser.add_argument(
        "--thinking",
        choices=("honour", "ignore", "reject"),
        help="answer with reasoning apart, its tokens reported; a request's thinking_token_budget is honoured, "
        "ignored, or refused with HTTP 400 (thought())",
    )
    parser.add_argument(
        "--costs", action="store_true", help="answer with usage's cached tokens and vLLM's metrics (costed())"
    )
    parser.add_argument("--max-requests", type=int, default=2000)
    parser.add_argument("--max-seconds", type=float, default=900.0)
    args = parser.parse_args()
    state: dict[str, Any] = {"attempts": {}, "requests": 0}
    if args.hostile:
        with open(args.hostile, encoding="utf-8") as fh:
            state["script"] = json.load(fh)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(args, state))
    server.daemon_threads = True
    start = time.time()

    def watchdog() -> None:
        while state["requests"] < args.max_requests and time.time() - start < args.max_seconds:
            time.sleep(0.5)
        server.shutdown()

    threading.Thread(target=watchdog, daemon=True).start()
    print(f"flaky server on http://127.0.0.1:{args.port}/v1", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
