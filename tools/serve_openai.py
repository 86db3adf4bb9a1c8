"""A minimal OpenAI-compatible chat server for a local HF/GGUF model, on 127.0.0.1.

For tests and offline demos of the API model config: it serves
``POST /v1/chat/completions`` and ``GET /v1/models`` with greedy decoding,
one request at a time. Not a production server (use vLLM, SGLang or
llama.cpp for that).

    python tools/serve_openai.py --port 8765   # serves the bundled SmolLM2-135M-Instruct
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def load(folder: str, gguf: str | None):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kwargs = {"gguf_file": gguf} if gguf else {}
    tok = AutoTokenizer.from_pretrained(folder, **kwargs)
    model = AutoModelForCausalLM.from_pretrained(folder, torch_dtype="float32", **kwargs)
    model.eval()
    return tok, model


def make_handler(name: str, tok: Any, model: Any, request_log: str = "") -> type[BaseHTTPRequestHandler]:
    import torch

    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def _send(self, code: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path.rstrip("/") in ("/v1/models", "/health"):
                self._send(200, {"object": "list", "data": [{"id": name, "object": "model"}]})
            else:
                self._send(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:
            if self.path.rstrip("/") != "/v1/chat/completions":
                self._send(404, {"error": {"message": "not found"}})
                return
            try:
                req = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                messages = req["messages"]
                max_tokens = int(req.get("max_tokens") or req.get("max_completion_tokens") or 64)
            except (ValueError, KeyError, TypeError) as exc:
                self._send(400, {"error": {"message": f"bad request: {exc}"}})
                return
            temperature = float(req.get("temperature") or 0.0)
            top_p = float(req.get("top_p") or 1.0)
            if request_log:  # which sampling settings reached the server (tests read this)
                with open(request_log, "a", encoding="utf-8") as fh:
                    fh.write(json.dumps({"temperature": temperature, "top_p": top_p, "max_tokens": max_tokens}) + "\n")
            text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            ids = tok(text, return_tensors="pt", add_special_tokens=False)
            sampling = dict(do_sample=True, temperature=temperature, top_p=top_p) if temperature > 0 else {}
            with lock, torch.no_grad():
                out = model.generate(
                    **ids,
                    max_new_tokens=max_tokens,
                    pad_token_id=tok.pad_token_id or tok.eos_token_id,
                    **(sampling or dict(do_sample=False)),
                )
            new = out[0, ids["input_ids"].shape[1] :]
            content = tok.decode(new, skip_special_tokens=True)
            self._send(
                200,
                {
                    "id": f"chatcmpl-{time.time_ns()}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": name,
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": content},
                            "finish_reason": "stop" if len(new) < max_tokens else "length",
                        }
                    ],
                    "usage": {
                        "prompt_tokens": int(ids["input_ids"].shape[1]),
                        "completion_tokens": int(len(new)),
                        "total_tokens": int(ids["input_ids"].shape[1] + len(new)),
                    },
                },
            )

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--model", default=None, help="HF folder (default: the bundled SmolLM2, converted once)")
    parser.add_argument("--gguf", default=None)
    parser.add_argument("--name", default="smollm2-135m-instruct")
    parser.add_argument("--request-log", default="", help="append each request's sampling settings here (JSON lines)")
    args = parser.parse_args()
    folder, gguf = args.model, args.gguf
    if folder is None:
        from needlebench.opencompass.models import smollm2_folder

        folder = smollm2_folder()
    tok, model = load(folder, gguf)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(args.name, tok, model, args.request_log))
    print(f"serving {args.name} on http://127.0.0.1:{args.port}/v1", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
