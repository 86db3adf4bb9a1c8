"""The bundled SmolLM2 as a stand-in reasoning model, for checking a real engine's thinking budget.

Two of SmolLM2's unused special tokens (``<jupyter_start>``, ``<jupyter_text>``) are renamed ``<think>`` and
``</think>`` (single tokens, as vLLM's reasoning parsers require) and the chat template opens a think block
after the assistant's turn starts, as DeepSeek-R1's does. SmolLM2 never writes ``</think>`` by itself, so its
reasoning runs until the engine's thinking budget ends it, or to the output budget when the engine ignores
the budget: what the engine does with a budget shows in every answer. The weights are linked, not copied.

Usage: python tools/smollm2_think.py SOURCE_DIR TARGET_DIR   (prints TARGET_DIR)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

RENAMED = {"<jupyter_start>": "<think>", "<jupyter_text>": "</think>"}
OPEN_THINK = "<|im_start|>assistant\n<think>\n"


def build(source: Path, target: Path) -> Path:
    """Write the stand-in's folder: tokenizer and template changed, everything else linked.

    Args:
        source: the SmolLM2 folder (``tools/vllm_cpu.sh`` builds ``.cache/smollm2-135m-hf``).
        target: the folder to write (made if missing; its files replaced).
    """
    target.mkdir(parents=True, exist_ok=True)
    for path in source.iterdir():
        if path.name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
            continue
        link = target / path.name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(path.resolve())
    tokenizer = json.loads((source / "tokenizer.json").read_text(encoding="utf-8"))
    for token in tokenizer["added_tokens"]:
        if token["content"] in RENAMED:
            token["content"], token["special"] = RENAMED[token["content"]], False  # text, as Qwen3's and R1's are
    vocab = tokenizer["model"]["vocab"]  # the same ids under their new names, so no token is added
    for old, new in RENAMED.items():
        vocab[new] = vocab.pop(old)
    (target / "tokenizer.json").write_text(json.dumps(tokenizer, ensure_ascii=False), encoding="utf-8")
    config = json.loads((source / "tokenizer_config.json").read_text(encoding="utf-8"))
    for entry in (config.get("added_tokens_decoder") or {}).values():
        if entry.get("content") in RENAMED:
            entry["content"], entry["special"] = RENAMED[entry["content"]], False
    (target / "tokenizer_config.json").write_text(json.dumps(config, ensure_ascii=False), encoding="utf-8")
    template = (source / "chat_template.jinja").read_text(encoding="utf-8")
    opened = template.replace("'<|im_start|>assistant\n'", repr(OPEN_THINK).replace("\\n", "\n"))
    if opened == template:
        raise SystemExit(f"{source / 'chat_template.jinja'}: no assistant turn start to open a think block after")
    (target / "chat_template.jinja").write_text(opened, encoding="utf-8")
    return target


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__.strip().splitlines()[-1])
    print(build(Path(sys.argv[1]), Path(sys.argv[2])))
