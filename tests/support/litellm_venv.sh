#!/usr/bin/env bash
# Create the real LiteLLM proxy's own venv (never the project's): the gateway the smoke
# test goes through. Idempotent: a finished venv is kept. 1.100.5 is pinned: later
# releases' [proxy] extra needs litellm-proxy-extras builds some indexes do not carry.
# prometheus_client: the proxy's `callbacks: ["prometheus"]` (the gateway's /metrics, the
# console's gateway source) needs it and the [proxy] extra does not bring it; a venv made
# before it was added here gets it on the next run.
set -euo pipefail
VENV=${POD_CONSOLE_LITELLM_VENV:-/opt/litellm-venv}
if [ -x "$VENV/bin/litellm" ] && [ -f "$VENV/.pod-console-ready" ]; then
  "$VENV/bin/python" -c 'import prometheus_client' 2>/dev/null ||
    "$VENV/bin/pip" install -q --disable-pip-version-check 'prometheus_client>=0.20'
  echo "litellm venv ready at $VENV"; exit 0
fi
python3 -m venv "$VENV"
"$VENV/bin/pip" install -q --disable-pip-version-check 'litellm[proxy]==1.100.5' \
  'prometheus_client>=0.20'
touch "$VENV/.pod-console-ready"
echo "litellm venv ready at $VENV"
