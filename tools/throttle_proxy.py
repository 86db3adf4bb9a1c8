"""A rate-limiting proxy on 127.0.0.1 in front of an OpenAI-compatible server, as a provider limits tokens per minute.

Each chat completion costs its prompt's characters / 4 plus its ``max_tokens``; a token bucket of ``--burst``
tokens refills at ``--tokens-per-second``. A request the bucket cannot pay for now is answered 429 with
``Retry-After`` (the whole seconds until it could), as providers answer; one larger than the bucket goes
when the bucket is full. Every request is logged (JSON lines): its prompt digest, cost, status, and the
requests and tokens in flight through the proxy when it arrived. The proxy is bounded (``--max-seconds``).

    python tools/throttle_proxy.py --port 8800 --upstream http://127.0.0.1:8011 --log /tmp/proxy.jsonl
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Bucket:
    """Tokens that refill at a rate, up to a burst."""

    def __init__(self, rate: float, burst: float) -> None:
        self.rate, self.burst, self.level, self.at = rate, burst, burst, time.monotonic()
        self.lock = threading.Lock()

    def take(self, cost: float) -> float:
        """0.0 when paid; else the seconds until the bucket could pay (nothing taken)."""
        with self.lock:
            now = time.monotonic()
            self.level = min(self.burst, self.level + (now - self.at) * self.rate)
            self.at = now
            if self.level >= cost or self.level >= self.burst:
                self.level -= min(cost, self.level)
                return 0.0
            return (min(cost, self.burst) - self.level) / self.rate


def cost_of(request: dict[str, Any]) -> int:
    """A chat completion's cost: its messages' characters / 4 plus its output budget."""
    chars = sum(len(str(m.get("content", ""))) for m in request.get("messages", []))
    return chars // 4 + int(request.get("max_tokens") or request.get("max_completion_tokens") or 0)


def make_handler(args: argparse.Namespace, bucket: Bucket, state: dict[str, Any]) -> type[BaseHTTPRequestHandler]:
    lock = threading.Lock()

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

        def _forward(self, body: bytes | None) -> tuple[int, bytes]:
            request = urllib.request.Request(args.upstream + self.path, data=body, method=self.command)
            request.add_header("Content-Type", "application/json")
            try:
                with urllib.request.urlopen(request, timeout=900) as r:
                    return r.status, r.read()
            except urllib.error.HTTPError as e:
                return e.code, e.read()

        def do_GET(self) -> None:
            self._send(*self._forward(None))

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            try:
                req = json.loads(body)
            except ValueError:
                self._send(400, b'{"error": {"message": "bad request"}}')
                return
            cost = cost_of(req)
            digest = hashlib.sha256(json.dumps(req.get("messages"), sort_keys=True).encode()).hexdigest()[:16]
            wait = bucket.take(cost)
            with lock:
                entry = {"prompt": digest, "cost": cost, "requests_in_flight": state["requests"]}
                entry["tokens_in_flight"] = state["tokens"]
                if not wait:
                    state["requests"] += 1
                    state["tokens"] += cost
            if wait:
                retry = max(1, math.ceil(wait))
                entry.update(status=429, retry_after=retry)
                self._log(entry)
                self._send(429, b'{"error": {"message": "rate limit: tokens per second"}}', {"Retry-After": str(retry)})
                return
            try:
                status, data = self._forward(body)
            finally:
                with lock:
                    state["requests"] -= 1
                    state["tokens"] -= cost
            entry["status"] = status
            self._log(entry)
            self._send(status, data)

        def _log(self, entry: dict[str, Any]) -> None:
            with lock, open(args.log, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(entry) + "\n")

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=8800)
    parser.add_argument("--upstream", required=True, help="the server's base, e.g. http://127.0.0.1:8011")
    parser.add_argument("--log", required=True, help="append each request here (JSON lines)")
    parser.add_argument("--tokens-per-second", type=float, default=1000.0)
    parser.add_argument("--burst", type=float, default=2000.0, help="the bucket's size in tokens")
    parser.add_argument("--max-seconds", type=float, default=900.0)
    args = parser.parse_args()
    state: dict[str, Any] = {"requests": 0, "tokens": 0}
    server = ThreadingHTTPServer(
        ("127.0.0.1", args.port), make_handler(args, Bucket(args.tokens_per_second, args.burst), state)
    )
    server.daemon_threads = True
    stop = threading.Timer(args.max_seconds, server.shutdown)
    stop.daemon = True
    stop.start()
    print(f"throttling proxy on http://127.0.0.1:{args.port}/v1 -> {args.upstream}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
