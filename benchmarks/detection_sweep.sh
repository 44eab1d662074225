#!/usr/bin/env bash
# The committed detection results (docs/tasks.md "Detection"; LEADERBOARD.md's shapes-det and events-det
# tables): the embedded COCO-format and GEN1-format sets, `none` (the no-PE baseline) and `pape`,
# seeds 0-2, vit-nano, on 2 worker processes of 1 thread each, with the detection task's default
# analyses. A rerun skips complete runs. Then: bench leaderboard --results $OUT/embedded ...
set -euo pipefail
OUT=${OUT:-results}
BENCH=${BENCH:-bench}
PES=${PES:-none,pape}
SEEDS=${SEEDS:-0,1,2}
RECIPE=(--model vit-nano --workers 2 --preload --deterministic --epochs 6 --batch-size 16 --no-progress-bar)
mkdir -p "$OUT"
echo "start $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD 2>/dev/null)" >> "$OUT/detection_sweep_time.txt"
"$BENCH" sweep --datasets shapes-det,events-det --pes "$PES" --seeds "$SEEDS" --out "$OUT/embedded" "${RECIPE[@]}"
echo "end $(date -u +%FT%TZ)" >> "$OUT/detection_sweep_time.txt"
