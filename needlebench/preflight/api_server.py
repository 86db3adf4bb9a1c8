"""Check an OpenAI-compatible server before any prompt is sent to it.

A server that is down, serves another model name, or has a shorter context than
the config's ``max_seq_len`` otherwise shows up as hundreds of failed requests
(each retried, each recorded as ``request_failed``) hours into a run. One
``GET /v1/models`` answers all three: it lists the served names, and vLLM, SGLang
and LMDeploy add each model's ``max_model_len``.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

from ..errors import ConfigError
from ..placement import asked_budget
from ..runfolder.keys import key_from_env

__all__ = ["check_api_server", "check_budget_field", "served_window"]


def _bases(model: Mapping[str, Any]) -> list[str]:
    base = model["openai_api_base"]
    return [str(b) for b in base] if isinstance(base, list | tuple) else [str(base)]


def _key(model: Mapping[str, Any]) -> str:
    """The key the model's requests carry: ``key_env``'s variable read now (unset: ``MissingKey``), else ``key``."""
    if model.get("key_env"):
        return key_from_env(str(model["key_env"]), str(model.get("abbr", model.get("path"))))[0]
    key = model.get("key") or ""
    if isinstance(key, list | tuple):
        key = key[0] if key else ""
    return os.environ.get("OPENAI_API_KEY", "") if key == "ENV" else str(key)


def _server_context(entry: Mapping[str, Any]) -> int | None:
    for field in ("max_model_len", "context_length", "max_context_length"):
        value = entry.get(field)
        if isinstance(value, int) and value > 0:
            return value
    return None


def check_api_server(model: Mapping[str, Any], timeout: float = 15.0) -> dict[str, Any]:
    """Ask each of a model's servers which models it serves, and at what context length.

    Args:
        model: an OpenCompass API model config (``openai_api_base``, ``path``, ``key``, ``max_seq_len``).
        timeout: seconds to wait for each server's answer.

    Returns:
        ``{"models": [served names], "max_model_len": int | None}`` of the last server asked.

    Raises:
        MissingKey: the model's ``key_env`` names a variable that is not set (nothing is sent).
        ConfigError: a server cannot be reached or rejects the key, does not serve ``path``, or
            serves it with a shorter context than ``max_seq_len``; the message names the model
            config, the URL and the fix.
    """
    abbr = model.get("abbr", model.get("path"))
    want = str(model.get("path"))
    max_seq_len = model.get("max_seq_len")
    info: dict[str, Any] = {"models": [], "max_model_len": None}
    key = _key(model)
    for base in _bases(model):
        url = base.rstrip("/") + "/models"
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout) as resp:
                listing = json.loads(resp.read().decode("utf-8", errors="replace"))
        except urllib.error.HTTPError as exc:
            if exc.code in (401, 403):
                raise ConfigError(
                    f"model {abbr}: the server at {base} rejected the API key (HTTP {exc.code}); name the variable "
                    "that holds it in the model config, api_model(key_env='VARIABLE') (the shipped API config "
                    "reads $NEEDLEBENCH_API_KEY; key='ENV' reads $OPENAI_API_KEY)"
                ) from None
            # a server or proxy without a model listing: nothing to check, the requests will tell
            continue
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ConfigError(
                f"model {abbr}: cannot reach the server at {base} ({reason}); start it, or fix "
                "base_url in the model config. Nothing was sent."
            ) from None
        except ValueError:
            continue  # not JSON: not an OpenAI-style listing
        entries = [e for e in listing.get("data", []) if isinstance(e, dict)] if isinstance(listing, dict) else []
        served = [str(e.get("id")) for e in entries]
        info["models"] = served
        if served and want not in served:
            raise ConfigError(
                f"model {abbr}: the server at {base} does not serve {want!r}; it serves {served}. "
                "Set model= in api_model(...) to one of them (vLLM: the --served-model-name)."
            )
        entry = next((e for e in entries if str(e.get("id")) == want), {})
        context = _server_context(entry)
        info["max_model_len"] = context
        if context and max_seq_len and int(max_seq_len) > context:
            raise ConfigError(
                f"model {abbr}: max_seq_len={max_seq_len} but the server at {base} serves {want!r} with a "
                f"context of {context} tokens (--max-model-len); longer prompts would be refused. Set "
                f"max_seq_len={context} so over-length prompts are shortened or skipped before they are sent."
            )
    return info


def check_budget_field(model: Mapping[str, Any], timeout: float = 60.0) -> None:
    """Ask the server once whether it takes the model's thinking-budget field, before any prompt of the run.

    A server that refuses the field (vLLM without a reasoning parser answers 400) would fail every request
    of the run; one that drops it silently is caught later, sample by sample, as "thinking budget not
    enforced". One chat request of one token, with the model's ``extra_body``; nothing is asked without a budget.

    Args:
        model: an API model config that asks for a thinking budget (``models.api_model``).
        timeout: seconds to wait for the answer.

    Raises:
        MissingKey: the model's ``key_env`` names a variable that is not set.
        ConfigError: the server refuses the request (HTTP 400 or 422): one line naming the model, the setting
            and what the server said.
    """
    asked = asked_budget(model)
    if asked is None:
        return
    budget = asked["budget"]
    abbr = model.get("abbr", model.get("path"))
    key = _key(model)
    body = {
        "model": str(model.get("path")),
        "messages": [{"role": "user", "content": "Say OK."}],
        "max_tokens": 1,
        **dict(model.get("extra_body") or {}),
    }
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}
    for base in _bases(model):
        url = base.rstrip("/") + "/chat/completions"
        request = urllib.request.Request(url, data=json.dumps(body).encode("utf-8"), headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=timeout):
                pass
        except urllib.error.HTTPError as exc:
            if exc.code not in (400, 422):
                continue  # not about the field: the run's own requests will tell
            said = exc.read().decode("utf-8", errors="replace")
            try:
                said = str(json.loads(said).get("error", {}).get("message") or said)
            except (ValueError, AttributeError):
                pass
            said = " ".join(said.split())[:300].rstrip(".")
            if not any(word in said.lower() for word in ("thinking", "budget", "reasoning")):
                continue  # refused for another reason (max_tokens, say): the run's own requests will tell
            raise ConfigError(
                f"model {abbr}: the server at {base} refuses a thinking budget of {budget} tokens "
                f"(thinking_field={asked['field']!r}): {said}. Start the server so that it takes it "
                "(vLLM: --reasoning-parser), pick the field it takes, or drop the budget. No prompt of the run was sent."
            ) from None
        except (urllib.error.URLError, OSError):
            continue  # check_api_server has said whether the server is up


def _get_json(url: str, key: str | None, timeout: float) -> Any:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout) as resp:
        return json.loads(resp.read().decode("utf-8", errors="replace"))


def served_window(base: str, name: str, key: str | None = None, timeout: float = 10.0) -> dict[str, Any]:
    """What a server says of the window it serves ``name`` with, for the request log (``rope``).

    ``GET /v1/models`` gives the context (``max_model_len``); a vLLM server started with
    ``VLLM_SERVER_DEV_MODE=1`` also shows its configuration at ``/server_info``, whose ``hf_overrides`` hold the
    RoPE scaling it was started with (``--hf-overrides``). Why ask the server: its start flags decide the
    scaling, not the run's config; where it shows none, the record says the scaling was not reported.

    Args:
        base: the model's ``openai_api_base`` (``http://host:port/v1``).
        name: the served model name.
        key: the API key, if the server wants one.
        timeout: seconds to wait for each answer.
    """
    out: dict[str, Any] = {"scaling": None, "max_model_len": None, "read_from": "server did not answer"}
    try:
        listing = _get_json(base.rstrip("/") + "/models", key, timeout)
        entries = [e for e in listing.get("data", []) if isinstance(e, dict)] if isinstance(listing, dict) else []
        entry = next((e for e in entries if str(e.get("id")) == name), {})
        out.update(max_model_len=_server_context(entry), read_from="server /v1/models (scaling not reported)")
    except (urllib.error.URLError, OSError, ValueError) as exc:
        out["read_from"] = f"server did not answer ({type(exc).__name__})"
        return out
    root = base.rstrip("/").removesuffix("/v1")
    try:
        info = _get_json(root + "/server_info?config_format=json", key, timeout)
        model = info["vllm_config"]["model_config"]
    except (urllib.error.URLError, OSError, ValueError, KeyError, TypeError):
        return out  # not vLLM, or not in dev mode: the scaling is not shown
    overrides = model.get("hf_overrides") if isinstance(model.get("hf_overrides"), dict) else {}
    block = overrides.get("rope_scaling") or overrides.get("rope_parameters")
    out.update(scaling=block or None, read_from="vLLM /server_info (hf_overrides)")
    if isinstance(model.get("max_model_len"), int):
        out["max_model_len"] = model["max_model_len"]
    return out
