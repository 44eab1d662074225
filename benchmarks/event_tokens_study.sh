#!/usr/bin/env bash
# The event-token study (docs/tasks.md "Event cameras"; results/event-tokens/REPORT.md): `events-det`
# read as frames (the default: 50 ms, 4 bins) and as spiking tokens (`--data-option tokens=spiking`),
# each with `none` (the no-PE baseline) and `pape`, seeds 0-2, vit-nano, 3 epochs at batch 16, no
# analyses, on 2 worker processes of 1 thread each. A rerun skips complete runs. Then:
# python -m benchmarks.event_tokens_findings --report results/event-tokens/REPORT.md
set -euo pipefail
OUT=${OUT:-results/event-tokens}
BENCH=${BENCH:-bench}
PES=${PES:-none,pape}
SEEDS=${SEEDS:-0,1,2}
RECIPE=(--model vit-nano --workers 2 --preload --deterministic --epochs 3 --batch-size 16 --analyses none
        --no-progress-bar)
mkdir -p "$OUT"
echo "start $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD 2>/dev/null)" >> "$OUT/study_time.txt"
"$BENCH" sweep --datasets events-det --pes "$PES" --seeds "$SEEDS" --out "$OUT/frames" "${RECIPE[@]}"
"$BENCH" sweep --datasets events-det --pes "$PES" --seeds "$SEEDS" --out "$OUT/spiking" "${RECIPE[@]}" \
  --data-option tokens=spiking
echo "end $(date -u +%FT%TZ)" >> "$OUT/study_time.txt"
