#!/bin/bash
# Issue 43's GPU check, on an offline GPU host, from the lab's checkout (one command):
#   scripts/gpu_fastapi.sh BUNDLE OUT [WORKERS...]
# BUNDLE: a folder made by ../shared/gpu-offline/build_bundle.sh (its site.tar.xz), inside the checkout
# where the host gets a copy of it (e.g. results/gpu-bundle; results/ is git-ignored). It runs
#   1. notebook 03 with the full preset (its "one process vs N" step included),
#   2. python -m servelab.bench ceiling --service pt --workers 1 WORKERS... (default 1 4 8),
#   3. nvidia-smi dmon beside both,
# and leaves OUT/run.tgz (the run's folder), OUT/bench-ceiling-pt.json, OUT/dmon.txt and OUT/log.txt.
# The run's rows then go to results/reference/ (see its README) with the two files beside them.
# KEEP=1 reuses the wheels an earlier call unpacked into /tmp/gpu-lab.
set -u
BUNDLE=$(realpath "${1:?usage: scripts/gpu_fastapi.sh BUNDLE OUT [WORKERS...]}")
OUT=$(realpath -m "${2:?usage: scripts/gpu_fastapi.sh BUNDLE OUT [WORKERS...]}"); shift 2
WORKERS="${*:-4 8}"
export PYTHONUNBUFFERED=1; T=/tmp/gpu-lab; LOG=$OUT/log.txt; mkdir -p "$OUT"
cd "$(dirname "$(realpath "$0")")/.." || exit 2
if [ -z "${KEEP:-}" ] || [ ! -d $T/site ]; then
  rm -rf $T/site; mkdir -p $T/site; tar -xJf "$BUNDLE/site.tar.xz" -C $T/site || exit 2
fi
export PATH=$T/site/bin:$PATH LD_LIBRARY_PATH=$T/site/bin:$T/site/nvidia_pytriton.libs:${LD_LIBRARY_PATH:-}
export PYTHONPATH=$T/site
{ git log -1 --oneline 2>/dev/null || echo "commit: not a git checkout"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nproc; uptime
  python3 -c "import numpy,torch;print('numpy',numpy.__version__,'torch',torch.__version__,torch.cuda.is_available())"
  python3 -m servelab.core.samples >/dev/null && python3 -m servelab.core.model build; } >> "$LOG" 2>&1
nvidia-smi dmon -s um -d 1 > "$OUT/dmon.txt" 2>&1 & DMON=$!
trap 'kill "$DMON" 2>/dev/null || true' EXIT  # an interrupted script leaves no sampler behind
RUN=$T/run-full-03-$(date +%H%M%S)
python3 -m servelab.lab run --preset full --only 03 --run-dir "$RUN" 2>&1 | tr '\r' '\n' | grep -av '^lab:' >> "$LOG"
# shellcheck disable=SC2086  # WORKERS is a list of numbers
python3 -m servelab.bench ceiling --service pt --workers 1 $WORKERS --rounds 2 \
  --json "$OUT/bench-ceiling-pt.json" 2>&1 | tr '\r' '\n' | grep -av '%|' >> "$LOG"
kill $DMON 2>/dev/null
tar czf "$OUT/run.tgz" -C "$(dirname "$RUN")" "$(basename "$RUN")"
grep -a -A3 "closest to the ceiling\|^service " "$LOG" | tail -8
