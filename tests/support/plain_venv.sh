#!/usr/bin/env bash
# A venv with the console as a plain `pip install .` puts it (no extras: no
# prometheus_client, no textual-serve, no test tools), for the test that runs the demo
# from it (tests/tui/test_plain_install.py: "a plain install runs all it offers").
# Re-run, it reinstalls this checkout's code over the kept dependencies (seconds).
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV=${POD_CONSOLE_PLAIN_VENV:-/opt/plain-venv}
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
"$VENV/bin/pip" install -q --disable-pip-version-check .
"$VENV/bin/pip" install -q --disable-pip-version-check --force-reinstall --no-deps .
echo "plain venv ready at $VENV"
