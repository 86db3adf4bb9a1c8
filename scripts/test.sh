#!/usr/bin/env bash
# The README's test command: set up (if needed), lint, then the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check needlebench tests tools bench configs
.venv/bin/python -m pytest -q -p no:cacheprovider "$@"
