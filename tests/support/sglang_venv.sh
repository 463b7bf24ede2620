#!/usr/bin/env bash
# Create the SGLang venv whose metrics code makes tests/fixtures/sglang-0.5.23
# (tests/support/sglang_exposition.py). Not an SGLang server: the sglang 0.5.23 wheel with
# --no-deps, the CPU torch wheel, and only what `import
# sglang.srt.observability.metrics_collector` pulls in (found by importing it until it
# imports). About 2.4 GB (torch, triton, transformers): too large for .ci/run, so the
# fixtures are committed and tests/support/check_sglang_fixture.py regenerates and compares
# them only where this venv exists. Idempotent: a finished venv is kept.
set -euo pipefail
VENV=${POD_CONSOLE_SGLANG_VENV:-/opt/sglang-venv}
if [ -x "$VENV/bin/python" ] && [ -f "$VENV/.pod-console-ready" ]; then
  echo "sglang venv ready at $VENV"; exit 0
fi
python3 -m venv "$VENV"
PIP=("$VENV/bin/pip" install -q --disable-pip-version-check)
"${PIP[@]}" --no-deps sglang==0.5.23
# torch: the CPU build (the index's default is CUDA's, which needs libcudnn to import)
if ls /opt/wheels/torch-2.13.0+cpu-*.whl >/dev/null 2>&1; then
  "${PIP[@]}" --no-deps /opt/wheels/torch-2.13.0+cpu-*.whl
else
  "${PIP[@]}" --no-deps torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
fi
"${PIP[@]}" --no-deps transformers==5.19.0
"${PIP[@]}" safetensors tokenizers
"${PIP[@]}" --no-deps prometheus_client msgspec numpy orjson psutil pybase64 requests \
  urllib3 idna certifi typing_extensions triton packaging pillow starlette anyio \
  pydantic pydantic_core typing_inspection pyzmq tqdm IPython traitlets pygments aiohttp \
  multidict attrs yarl propcache aiohappyeyeballs aiosignal frozenlist regex \
  huggingface_hub httpx2 pyyaml filelock httpcore2 truststore h11 sympy mpmath dill \
  apache-tvm-ffi sentencepiece networkx compressed_tensors loguru annotated_types gguf
touch "$VENV/.pod-console-ready"
echo "sglang venv ready at $VENV"
