#!/usr/bin/env bash
# The test command (README.md): set up (if needed), lint, build the docs site, then the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The report test drives Debian's Chromium (never a downloaded browser).
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    (apt-get install -y -q chromium >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; })
  else
    echo "warning: chromium is not installed; install Debian's chromium for the browser test" >&2
  fi
fi
.venv/bin/ruff check needlebench tests tools bench configs
# The documentation site (mkdocs.yml), strict: a broken link, a missing page or a docstring mkdocstrings cannot
# read fails the test command. Built into a temporary folder; nothing in the build reaches the network.
site=$(mktemp -d)
trap 'rm -rf "$site"' EXIT
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --quiet --site-dir "$site"
# With no arguments: everything but the opt-in sets: the engine tests (tests/test_vllm_inproc.py builds a 9 GB
# vLLM CPU environment, ~6 min cold; tests/test_vllm_server.py's run_batch test starts vLLM's batch engine, ~85 s) and the whole KV-cache press sweep (tests/test_kv_press.py, ~24 min on
# 2 cores; its wiring test stays in the default set); `bash scripts/test.sh -m engine` (or -m methods) runs them.
if [ $# -eq 0 ]; then set -- -m "not engine and not methods"; fi
.venv/bin/python -m pytest -q -rs -p no:cacheprovider --durations=25 -n 2 --dist loadfile --no-loadscope-reorder "$@"
