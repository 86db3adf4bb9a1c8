#!/usr/bin/env bash
# The main job (README.md): set up (if needed), run the small suite with the
# bundled CPU model through OpenCompass, then build the report.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
CONFIG=${1:-configs/eval_needlebench_tiny.py}
.venv/bin/opencompass "$CONFIG"
