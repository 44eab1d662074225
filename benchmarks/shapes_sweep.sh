#!/usr/bin/env bash
# The committed `shapes` runs (results/embedded/shapes/REPORT.md, LEADERBOARD.md's shapes table): the default
# `bench run` recipe of their time (vit-nano, 4 epochs -- pinned here since the default became 3 -- and every
# analysis that applies) for the PEs the SSDC and EED claims compare, seeds 0-2, `--deterministic`, on 2 worker
# processes of 1 thread each. A rerun skips complete runs.
# Then: python -m benchmarks.findings --results $OUT/embedded --report $OUT/embedded/shapes/REPORT.md --png docs/findings.png
set -euo pipefail
OUT=${OUT:-results}
BENCH=${BENCH:-bench}
PES=${PES:-ape,sincos,rope-axial,pape}
SEEDS=${SEEDS:-0,1,2}
mkdir -p "$OUT"
echo "start $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD 2>/dev/null)" >> "$OUT/shapes_sweep_time.txt"
"$BENCH" sweep --datasets shapes --pes "$PES" --seeds "$SEEDS" --out "$OUT/embedded" --model vit-nano --epochs 4 --workers 2 \
  --preload --deterministic --no-progress-bar
echo "end $(date -u +%FT%TZ)" >> "$OUT/shapes_sweep_time.txt"
