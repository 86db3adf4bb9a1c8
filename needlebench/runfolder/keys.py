"""API keys: named by an environment variable in configs, never written into a run folder.

A run folder is what users zip and share, and OpenCompass writes the whole model config into it (the
config dump ``configs/<time>_<pid>.py``, and each task's parameter file ``tmp/<uuid>_params.py``, which
its runner deletes when the task ends unless ``keep_tmp_file``). So a model config names the
*variable* that holds its key (``api_model(key_env="NEEDLEBENCH_API_KEY")``, resolved by
``api.ResilientOpenAISDK`` when a request is sent; OpenCompass's own ``key="ENV"`` reads
``$OPENAI_API_KEY`` when the model is built), and a key a user's config holds in clear text is handled
here, the one place every writer asks:

* :func:`hide_keys`: the clear key of one of our API models moves into this process's environment,
  under :func:`hidden_key_env` of the model's abbr, and the config names that variable instead; the
  task processes the runner starts inherit it. ``needlebench run`` does this as the config loads (so
  OpenCompass's dump never holds the key), the partitioner again for a plain ``opencompass`` run.
* :func:`redact`: a copy of a config with every key replaced by :data:`REDACTED`, whole (never a
  prefix or a suffix of it), for keys that cannot move (OpenCompass's own API classes, headers).
* :func:`scrub_text` / :func:`scrub_file`: every clear key found by :func:`clear_keys` replaced in
  a file already written (the plain ``opencompass`` command dumps the config before any of our code
  runs; the partitioner, which runs right after in the same process, scrubs the dump).

Keys sit in ``key``, ``keys``, ``api_key``, ``openai_api_key`` and in headers (``Authorization``,
``api-key``, ``x-api-key``), at any depth of a model config (``http_client_cfg``, ``extra_body``).
``"ENV"``, ``"EMPTY"`` and the empty string name no key and stay.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..files import atomic_write

__all__ = [
    "KEY_FIELDS",
    "KEY_HEADERS",
    "REDACTED",
    "MissingKey",
    "clear_keys",
    "hidden_key_env",
    "hide_keys",
    "key_from_env",
    "redact",
    "scrub_file",
    "scrub_text",
]

REDACTED = "<redacted>"
KEY_FIELDS = frozenset({"key", "keys", "api_key", "openai_api_key"})
KEY_HEADERS = frozenset({"authorization", "proxy-authorization", "api-key", "x-api-key"})
# values that name no key: OpenCompass's "read $OPENAI_API_KEY", vLLM's "no key" convention, a redacted one
_NOT_KEYS = frozenset({"", "ENV", "EMPTY", REDACTED})
_SCHEMES = ("Bearer ", "Basic ", "Token ")  # an Authorization value's scheme is not part of the secret
HIDDEN_PREFIX = "NEEDLEBENCH_KEY_"
OUR_API = "needlebench.opencompass.api.ResilientOpenAISDK"


class MissingKey(ConfigError):
    """The environment variable a model reads its key from is not set; the message names it."""


def _secret(value: str) -> str:
    """The secret part of a key field's value: an Authorization header without its scheme."""
    for scheme in _SCHEMES:
        if value.startswith(scheme):
            return value[len(scheme) :]
    return value


def _is_key_field(name: Any) -> bool:
    return isinstance(name, str) and (name in KEY_FIELDS or name.lower() in KEY_HEADERS)


def _values(value: Any) -> list[str]:
    """The clear keys one key field holds (a string, or a list of them as OpenCompass's ``key`` takes)."""
    items = value if isinstance(value, list | tuple) else [value]
    return [_secret(v) for v in items if isinstance(v, str) and _secret(v) not in _NOT_KEYS]


def clear_keys(config: Any) -> list[str]:
    """Every key a config holds in clear text, longest first (so a key inside another is replaced after it).

    Args:
        config: a model config, a list of them, or any nesting of mappings and lists.
    """
    found: set[str] = set()
    stack = [config]
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            for name, value in item.items():
                if _is_key_field(name):
                    found.update(_values(value))
                if isinstance(value, Mapping | list | tuple):
                    stack.append(value)
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return sorted(found, key=lambda k: (-len(k), k))


def redact(config: Any) -> Any:
    """A copy of ``config`` with every clear key replaced by :data:`REDACTED` (the rest as it was).

    Args:
        config: a model config, a list of them, or any nesting of mappings and lists.
    """
    if isinstance(config, Mapping):
        return {
            name: _redacted_field(value) if _is_key_field(name) else redact(value) for name, value in config.items()
        }
    if isinstance(config, list | tuple):
        return type(config)(redact(v) for v in config)
    return config


def _redacted_field(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return type(value)(_redacted_field(v) for v in value)
    if not isinstance(value, str) or _secret(value) in _NOT_KEYS:
        return value
    return value[: len(value) - len(_secret(value))] + REDACTED  # "Bearer <redacted>"


def _forms(secret: str) -> list[str]:
    """The ways a key can appear in a written file: as itself, in a Python repr, in JSON."""
    import json

    return list(dict.fromkeys([secret, repr(secret)[1:-1], json.dumps(secret)[1:-1]]))


# a key shorter than this is replaced only where it stands as a whole token: as a bare substring it would
# mangle words of logs and dumps (a key "test" in "test_range"), and no real secret is that short
_SHORT = 8


def _pattern(form: str) -> re.Pattern[str]:
    """A short key's form as a whole token (no letter, digit, ``_`` or ``-`` either side): a literal between
    lookarounds, linear to search."""
    return re.compile(rf"(?<![\w-]){re.escape(form)}(?![\w-])")


def scrub_text(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every occurrence of each secret (as written, or escaped by repr or JSON) replaced by
    :data:`REDACTED`; a key under 8 characters only where it stands as a whole token. Linear: one pass per
    secret form.

    Args:
        text: any text (a log line, a dumped config, an error message a server sent).
        secrets: the keys to remove (:func:`clear_keys`).
    """
    for secret in secrets:
        for form in _forms(secret):
            if not form:
                continue
            text = text.replace(form, REDACTED) if len(form) >= _SHORT else _pattern(form).sub(REDACTED, text)
    return text


def scrub_file(path: Path | str, secrets: Iterable[str]) -> bool:
    """Replace every secret in a file already written, whole or not at all (atomically); True if it held one.

    Read as bytes (a key is found in any file, text or not) and written back only where a secret occurs.

    Args:
        path: the file.
        secrets: the keys to remove (:func:`clear_keys`).
    """
    path = Path(path)
    data = path.read_bytes()
    text = data.decode("utf-8", errors="surrogateescape")  # any bytes, written back as they were
    clean = scrub_text(text, secrets)
    if clean == text:
        return False
    with atomic_write(path, suffix=path.suffix) as tmp:
        tmp.write_bytes(clean.encode("utf-8", errors="surrogateescape"))
    return True


def hidden_key_env(abbr: str) -> str:
    """The variable a model's clear key moves to: ``NEEDLEBENCH_KEY_`` and its abbr, upper case, ``_`` for the rest.

    Args:
        abbr: the model's abbr.
    """
    return HIDDEN_PREFIX + (re.sub(r"[^A-Z0-9]+", "_", abbr.upper()).strip("_") or "MODEL")


def hide_keys(models: Iterable[dict[str, Any]]) -> dict[str, str]:
    """Move the clear ``key`` of each of our API models into an environment variable the config names instead.

    Each such model (a ``ResilientOpenAISDK`` with a clear ``key`` and no ``key_env``) gets
    ``key_env=hidden_key_env(abbr)`` and loses ``key``, in place; a list of keys becomes one variable,
    comma-separated, as OpenCompass's ``$OPENAI_API_KEY``. Other models are left as they are (their
    classes read a key only from ``key``): :func:`redact` and :func:`scrub_file` keep them out of files.

    Args:
        models: model configs (mutable mappings), changed in place.

    Returns:
        The variables to set in the environment of this process (so its task processes inherit them).
    """
    moved: dict[str, str] = {}
    owner: dict[str, str] = {}
    for model in models:
        if _type_name(model.get("type")) != OUR_API or model.get("key_env"):
            continue
        keys = _values(model.get("key"))
        if not keys:
            continue
        abbr = str(model.get("abbr") or model.get("path") or "model")
        name = hidden_key_env(abbr)
        if moved.get(name, ",".join(keys)) != ",".join(keys):  # two abbrs, one variable: never the other's key
            raise ConfigError(
                f"models {owner[name]!r} and {abbr!r} hold different API keys in clear text, which would both "
                f"move to ${name}; name each key's variable instead: api_model(key_env='VARIABLE')"
            )
        moved[name], owner[name] = ",".join(keys), abbr
        model["key_env"] = name
        del model["key"]
    return moved


def _type_name(kind: Any) -> str:
    """A model type as its dotted name (a string as written, a class by its module and name)."""
    if isinstance(kind, str):
        return kind
    return f"{getattr(kind, '__module__', '')}.{getattr(kind, '__qualname__', '')}"


def key_from_env(name: str, model: str) -> list[str]:
    """The keys a variable holds (comma-separated, as ``$OPENAI_API_KEY``), read now.

    Args:
        name: the variable (a model config's ``key_env``).
        model: the model, as the message names it.

    Raises:
        MissingKey: the variable is unset or empty; the message names it and the model.
    """
    value = os.environ.get(name, "")
    keys = [k.strip() for k in value.split(",") if k.strip()]
    if not keys:
        moved = " (the run moved the clear key of its config there)" if name.startswith(HIDDEN_PREFIX) else ""
        raise MissingKey(
            f"model {model}: the environment variable {name} that holds its API key (key_env) is not set{moved}; "
            f"set it ({name}=...) and run again (-r resumes: every answer already saved is kept)"
        )
    return keys
