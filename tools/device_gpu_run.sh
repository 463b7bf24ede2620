#!/usr/bin/env bash
# What ran on the device machine (2x H200) to capture tests/fixtures/nvml-h200x2:
# the raw NVML answers (idle and under a matmul load), pod-agent gpus, the exporter's
# exposition under load, and the telemetry benchmark. Run from the repository root.
set -x
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p /tmp/cap
python3 tools/nvml_capture.py /tmp/cap --load 40 2>&1 | tail -5
python3 -m pod_agent gpus
python3 -m pod_agent gpus --json > $OUT/gpus-idle.json
python3 - <<'PY' &
import torch, time, threading
def w(d):
    with torch.cuda.device(d):
        a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
        end = time.time() + 25
        while time.time() < end:
            for _ in range(20): a @ a
            torch.cuda.synchronize()
ts = [threading.Thread(target=w, args=(d,)) for d in range(torch.cuda.device_count())]
[t.start() for t in ts]; [t.join() for t in ts]
PY
LOAD=$!
python3 -m pod_agent exporter --listen 127.0.0.1:9400 > /tmp/exporter.log 2>&1 &
EXP=$!
sleep 15
python3 -c "import urllib.request;open('$OUT/exporter-load.prom','wb').write(urllib.request.urlopen('http://127.0.0.1:9400/metrics').read())"
python3 -m pod_agent gpus --json > $OUT/gpus-load.json
kill $EXP; wait $LOAD
cat /tmp/exporter.log
tar -czf $OUT/capture.tgz -C /tmp/cap .
python3 bench/gpu_telemetry_bench.py --seconds 60 > $OUT/bench.txt 2>&1
python3 bench/gpu_telemetry_bench.py --seconds 30 --fake --gpus 8 >> $OUT/bench.txt 2>&1
cat $OUT/bench.txt
nproc; python3 -c "import prometheus_client, pynvml; print(prometheus_client.__file__)"
# Later (issue 15, the exporter fed by the supervisor): the device image has no pydantic or
# PyYAML, which the supervisor imports, so they travel in build/devdeps (cp312 wheels:
#   pip install --target build/devdeps --python-version 3.12 --only-binary=:all: \
#       --platform manylinux2014_x86_64 --implementation cp pydantic pyyaml)
# and:  PYTHONPATH=$PWD/build/devdeps python3 bench/gpu_telemetry_bench.py --seconds 60
# output: tests/fixtures/nvml-h200x2/bench-agent.txt
