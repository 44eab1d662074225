#!/usr/bin/env bash
# Issue #44 item 7 (results/thread-spread/REPORT.md): rerun a sample of committed probe runs at this commit with the
# thread count they recorded (1) and with 2 threads, the proxy for another CPU; benchmarks/thread_spread.py reports
# the difference against each cell's seed-to-seed spread. Sample: seed 0 of every probe x PES (46 min on
# the 2-core machine for the committed records: the 1-thread reruns on 2 workers, the 2-thread ones on 1).
set -euo pipefail
OUT=${OUT:-results/thread-spread}
PES=${PES:-none,ape,rope-axial,rope-mixed,pape,alibi}
DATASETS=${DATASETS:-probe-anchoring,probe-context,probe-decay,probe-extrapolation,probe-rotation,probe-translation}
BENCH=${BENCH:-bench}
[ ! -e "$OUT/reruns.json" ] || { echo "thread_spread: expected no $OUT/reruns.json yet (move it away to rerun)" >&2; exit 2; }
mkdir -p "$OUT"
echo "start $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD 2>/dev/null)" >> "$OUT/time.txt"
common=(--results results/embedded --datasets "$DATASETS" --pes "$PES" --per-cell 1 --bench "$BENCH")
# rerun_check exits 1 when a rerun differs from the committed file: that is a finding here, not a failure
python -m benchmarks.rerun_check "${common[@]}" --workers 2 --json "$OUT/reruns.json" || [ $? -eq 1 ]
python -m benchmarks.rerun_check "${common[@]}" --workers 1 --threads 2 --json "$OUT/reruns.json" --append || [ $? -eq 1 ]
echo "end $(date -u +%FT%TZ)" >> "$OUT/time.txt"
python -m benchmarks.thread_spread --records "$OUT/reruns.json" --report "$OUT/REPORT.md"
