#!/usr/bin/env bash
# The README's test command: set up (if needed), lint, then the whole suite.
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
.venv/bin/python -m pytest -q -p no:cacheprovider --durations=25 "$@"
