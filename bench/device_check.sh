#!/usr/bin/env bash
# The GPU check, in one go (under 10 minutes): finds the device, installs CuPy if it is missing
# (pip install cupy-cuda12x, or from the wheels in $CUPY_WHEELS on a machine without network),
# runs tests/gpu and the other GPU tests with real CuPy (LUABRIDGE_GPU_TESTS=cupy: no numpy
# standing in), then bench/gpu.py, and writes a Markdown report to $DEVICE_CHECK_REPORT, else
# $OUT/device_check.md when $OUT is set (the device tool's folder that comes back), else
# build/device_check.md in the repository.
#
#   bash bench/device_check.sh            # from the repository root
#
# Exit status: 0 all passed; 1 a stage failed (the report says which); 2 no CUDA device;
# 3 no CuPy (and it could not be installed); 4 luabridge does not import with $PYTHON.
set -u
cd "$(dirname "$0")/.." || exit 1
REPORT=${DEVICE_CHECK_REPORT:-${OUT:+$OUT/device_check.md}}
REPORT=${REPORT:-build/device_check.md}
PY=${PYTHON:-}
if [ -z "$PY" ]; then
  if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
STATUS=0

say() { echo "$*"; echo "$*" >> "$REPORT"; }
# stage NAME SECONDS COMMAND...: runs it with a time limit, its last lines into the report
stage() {
  local name=$1 limit=$2; shift 2
  local log; log=$(mktemp)
  echo "== $name"
  local t0=$SECONDS
  timeout "$limit" "$@" > "$log" 2>&1
  local rc=$?
  cat "$log"
  { echo; echo "## $name (exit $rc, $((SECONDS - t0)) s)"; echo; echo '```'; tail -n 25 "$log"; echo '```'; } >> "$REPORT"
  [ "$rc" -eq 0 ] || STATUS=1
  rm -f "$log"
}

mkdir -p "$(dirname "$REPORT")"
echo "# luabridge device check, $(date -u '+%Y-%m-%d %H:%M UTC')" > "$REPORT"
say "report: $REPORT"
say "python: $PY ($("$PY" --version 2>&1))"

if ! LB=$("$PY" -c 'import luabridge, lupa, pytest' 2>&1); then
  say "device_check: luabridge or its test dependencies do not import with $PY: $(echo "$LB" | tail -n 1)"
  say "Install them first (pip install -e '.[test,gpu]'), or set PYTHON to a Python that has them."
  exit 4
fi

if ! command -v nvidia-smi > /dev/null 2>&1 || ! nvidia-smi -L > /dev/null 2>&1; then
  say "device_check: no CUDA device found (nvidia-smi is missing or lists no GPU); nothing to check."
  say "Run this on a machine with an NVIDIA GPU and its driver (see docs/cuda.md)."
  exit 2
fi
say "device: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -n 1)"

if ! "$PY" -c 'import cupy' > /dev/null 2>&1; then
  say "installing CuPy (cupy-cuda12x)"
  if [ -n "${CUPY_WHEELS:-}" ]; then
    "$PY" -m pip install --quiet --no-index --find-links "$CUPY_WHEELS" cupy-cuda12x
  else
    "$PY" -m pip install --quiet cupy-cuda12x
  fi
fi
if ! CUPY=$("$PY" -c 'import cupy; n = cupy.cuda.runtime.getDeviceCount(); assert n > 0, "CuPy sees no device"
print(cupy.__version__, n, "device(s)")' 2>&1); then
  say "device_check: CuPy is not usable: $(echo "$CUPY" | tail -n 1)"
  exit 3
fi
say "cupy: $CUPY"

export LUABRIDGE_GPU_TESTS=cupy
stage "tests/gpu (real CuPy)" 180 "$PY" -m pytest -q -rs -p no:cacheprovider tests/gpu
stage "the CUDA backend's CuPy tests" 90 "$PY" -m pytest -q -rs -p no:cacheprovider tests/test_cuda.py -k cupy
stage "fused CUDA kernels" 60 "$PY" -m pytest -q -rs -p no:cacheprovider tests/test_cuda_fuse.py
stage "bench/gpu.py --quick" 180 "$PY" bench/gpu.py --quick --json "${REPORT%.md}.json"

say ""
if [ "$STATUS" -eq 0 ]; then say "device_check: all stages passed"; else say "device_check: a stage failed (above)"; fi
exit "$STATUS"
