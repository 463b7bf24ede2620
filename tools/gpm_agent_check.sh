#!/usr/bin/env bash
# The pod agent's own GPM reading on a real Hopper GPU (issue 49, item 2), run ONCE on the
# device machine from the repository root:
#
#     bash tools/gpm_agent_check.sh            # files under $OUT (or /tmp/gpm-agent-check)
#
# What it does: `pod-agent gpus --json` (the agent's one-shot reading, GPM over one second)
# idle, then three times during a bf16 matmul loop (tensor-bound) and three times during a
# 4 GiB device copy loop (memory-bound) — the loops of tools/gpm_capture.py — then
# `nvidia-smi dmon --gpm-metrics 2,3,5,10` in the same loop as the reference; the
# exporter's DCGM_FI_PROF_* lines during the matmul loop; the agent's topology matrix
# against `nvidia-smi topo -m`. It ends with PASS/FAIL lines: the tensor loop's tensor
# activity above the copy loop's, the copy loop's DRAM activity above the matmul loop's,
# and the matrix equal to nvidia-smi's. Exit 0 only if every check passes.
#
# Needs only what the device image has (python3, torch, nvidia-ml-py, prometheus_client):
# `pod_agent gpus` and `pod_agent exporter` import neither pydantic nor PyYAML (the
# supervisor does; see tools/device_gpu_run.sh's note on build/devdeps). No network.
# (Dry-run without a GPU: PYTHONPATH=console/demo/fakenvml and a stub nvidia-smi run it
# end to end; the two ordering checks FAIL there, rightly: the stand-in replays one
# captured phase per GPU whatever loop runs.)
set -u -o pipefail
OUT=${OUT:-/tmp/gpm-agent-check}
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0
WORK=$(mktemp -d)
LOAD=""
EXP=""
cleanup() {  # only what this script started, by pid
    for p in $LOAD $EXP; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    rm -rf "$WORK"
}
trap cleanup EXIT

nvidia-smi -L
python3 -c "import pynvml; print('nvidia-ml-py', getattr(pynvml, '__version__', '?'))"

# the two loads, exactly as the capture ran them
python3 - "$WORK" <<'PY'
import sys
sys.path.insert(0, "tools")
from gpm_capture import LOADS
for name, code in LOADS.items():
    open(f"{sys.argv[1]}/{name}.py", "w").write(code)
PY

reading() {  # phase tag: one agent reading, one JSON line tagged with its phase
    python3 -m pod_agent gpus --json | python3 -c \
        "import json,sys; d=json.load(sys.stdin); d['phase']='$1'; print(json.dumps(d))" \
        >> "$OUT/agent.jsonl"
}

: > "$OUT/agent.jsonl"
: > "$OUT/dmon.txt"
reading idle
for phase in tensor memory; do
    python3 "$WORK/$phase.py" 60 &
    LOAD=$!
    sleep 10  # CUDA context and the first kernels: the steady part is read
    for _ in 1 2 3; do reading "$phase"; done
    if [ "$phase" = tensor ]; then
        python3 -m pod_agent exporter --listen 127.0.0.1:9499 --interval 1 \
            > "$WORK/exporter.log" 2>&1 &
        EXP=$!
        python3 - <<'PY' > "$OUT/exporter-tensor.prom"
import time, urllib.request
deadline = time.monotonic() + 30
text = ""
while time.monotonic() < deadline:  # GPM needs the exporter's second sample
    try:
        text = urllib.request.urlopen("http://127.0.0.1:9499/metrics", timeout=5).read().decode()
    except OSError:
        text = ""
    if "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{" in text:
        break
    time.sleep(0.5)
print(text)
PY
        kill "$EXP"; wait "$EXP" 2>/dev/null
        EXP=""
    fi
    # the reference after the agent's readings, not beside them: one GPM reader at a
    # time, as tools/gpm_capture.py recorded the fixtures
    echo "== $phase" >> "$OUT/dmon.txt"
    nvidia-smi dmon --gpm-metrics 2,3,5,10 -c 5 >> "$OUT/dmon.txt" 2>&1
    kill "$LOAD" 2>/dev/null; wait "$LOAD" 2>/dev/null
    LOAD=""
done
cat "$OUT/dmon.txt"
grep '^DCGM_FI_PROF_\|^pod_agent_gpm' "$OUT/exporter-tensor.prom"

nvidia-smi topo -m > "$OUT/nvidia-smi-topo-m.txt"
python3 - "$OUT" <<'PY' | tee "$OUT/summary.txt"
import json, sys
from pathlib import Path

import pynvml

from pod_agent import gpus, topology

out = Path(sys.argv[1])
rows = [json.loads(line) for line in (out / "agent.jsonl").read_text().splitlines()]
figs = ("sm_active_pct", "sm_occupancy_pct", "tensor_active_pct", "dram_active_pct")
print(f"{'phase':<8} gpu  gpm  " + "  ".join(f"{f[:-4]:>13}" for f in figs))
by: dict[str, list[dict]] = {}
for r in rows:
    for g in r["gpus"]:
        by.setdefault(r["phase"], []).append(g)
        print(f"{r['phase']:<8} {g['index']:>3}  {str(g['gpm_supported'])[:5]:<5}"
              + "  ".join(f"{g[f] if g[f] is not None else 'null':>13}" for f in figs))


def mean(phase: str, f: str) -> float:
    vals = [g[f] for g in by.get(phase, []) if g[f] is not None]
    return sum(vals) / len(vals) if vals else float("nan")


checks = {
    "tensor loop's tensor activity > copy loop's":
        mean("tensor", "tensor_active_pct") > mean("memory", "tensor_active_pct"),
    "copy loop's DRAM activity > tensor loop's":
        mean("memory", "dram_active_pct") > mean("tensor", "dram_active_pct"),
}
prom = (out / "exporter-tensor.prom").read_text()
checks["exporter serves DCGM_FI_PROF_PIPE_TENSOR_ACTIVE as a ratio"] = any(
    line.startswith("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{") and 0 < float(line.split()[-1]) <= 1
    for line in prom.splitlines())
pynvml.nvmlInit()
src = gpus.NvmlSource(pynvml)
top = src.topology()
smi = (out / "nvidia-smi-topo-m.txt").read_text()
print(top.render())
checks["topology matrix equals nvidia-smi topo -m"] = (
    (top.gpus, top.matrix) == topology.parse_smi(smi))
print(json.dumps(top.to_json()))
for phase in ("tensor", "memory"):
    print(f"mean {phase}: " + ", ".join(f"{f} {mean(phase, f):.1f}" for f in figs))
for what, ok in checks.items():
    print(("PASS " if ok else "FAIL ") + what)
sys.exit(0 if all(checks.values()) else 1)
PY
