"""Peak memory of a KV-cache press run against the plain model's, on the same 4k prompts (issue 60).

Each variant runs in a fresh process (its peak RSS is the process's own ``ru_maxrss``): the bundled SmolLM2
(float32, CPU) through OpenCompass's HuggingFace model, and through ``KVPressModel`` under SnapKV and
StreamingLLM before the question is seen and Finch with it, at ratio 0.5. The prompts are the S-RT rows at
4k (English, depths 0 and 100), as the dataset cache holds them; each press run gets each row's question offset.

Run: ``HF_HUB_OFFLINE=1 .venv/bin/python -m bench.kvpress_memory`` -> ``bench/kvpress_memory_4k.json``.
"""

from __future__ import annotations

import json
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

OUT = Path(__file__).with_name("kvpress_memory_4k.json")
VARIANTS = {
    "plain": None,
    "SnapKVPress-0.50-agnostic": {"press": "SnapKVPress", "compression_ratio": 0.5, "query": "agnostic"},
    "StreamingLLMPress-0.50-agnostic": {"press": "StreamingLLMPress", "compression_ratio": 0.5, "query": "agnostic"},
    "FinchPress-0.50-aware": {"press": "FinchPress", "compression_ratio": 0.5, "query": "aware"},
}


def _one(name: str) -> dict:
    """Run one variant in this process; its peak RSS and time."""
    from needlebench.cache.rows import load_rows
    from needlebench.opencompass.models import smollm2_folder, smollm2_model

    rows = load_rows("srt", lang="en", lengths=[4000], depths=[0, 100], repeats=1)
    prompts = list(rows["prompt"])
    chars = [json.loads(m).get("question_chars") for m in rows["meta"]]
    config = smollm2_model()  # the tests' SmolLM2 config: its constructor arguments
    kwargs = {k: config[k] for k in ("max_seq_len", "model_kwargs", "pad_token_id", "stop_words", "generation_kwargs")}
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if VARIANTS[name] is None:
        from opencompass.models import HuggingFacewithChatTemplate

        model = HuggingFacewithChatTemplate(smollm2_folder(), **kwargs)
        loaded = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        start = time.perf_counter()
        answers = [model.generate([p], max_out_len=24)[0] for p in prompts]
    else:
        from needlebench.opencompass.kvpress_model import KVPressModel

        model = KVPressModel(smollm2_folder(), kv_press=VARIANTS[name], **kwargs)
        loaded = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        start = time.perf_counter()
        answers = [
            model.generate([p], max_out_len=24, question_chars=[c])[0]["prediction"] for p, c in zip(prompts, chars)
        ]
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "prompts": len(prompts),
        "prompt_cl100k_tokens": [int(t) for t in rows["prompt_tokens"]],
        "peak_rss_mb": round(peak / 1024, 1),
        "rss_after_load_mb": round(loaded / 1024, 1),
        "rss_before_load_mb": round(before / 1024, 1),
        "generate_seconds": round(seconds, 2),
        "answers": answers,
    }


def main() -> None:
    if len(sys.argv) > 1:
        print(json.dumps(_one(sys.argv[1])))
        return
    results = {}
    for name in VARIANTS:
        done = subprocess.run(
            [sys.executable, "-m", "bench.kvpress_memory", name], capture_output=True, text=True, check=True
        )
        results[name] = json.loads(done.stdout.strip().splitlines()[-1])
    plain = results["plain"]["peak_rss_mb"]
    out = {
        "what": "peak RSS of a KV-cache press run against the plain model's, SmolLM2-135M float32 on the CPU, "
        "S-RT EN 4k (2 prompts, 24 output tokens), one fresh process per variant",
        "machine": {"python": platform.python_version(), "cores": __import__("os").cpu_count()},
        "variants": results,
        "peak_ratio_to_plain": {k: round(v["peak_rss_mb"] / plain, 3) for k, v in results.items()},
        "limit": 1.5,
    }
    OUT.write_text(json.dumps(out, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(json.dumps(out["peak_ratio_to_plain"]))


if __name__ == "__main__":
    main()
