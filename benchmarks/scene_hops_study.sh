#!/usr/bin/env bash
# Two small committed studies (docs/tasks.md), seeds 0-2, vit-nano, 2 worker processes of 1 thread each;
# a rerun skips complete runs; each folder's LEADERBOARD.md is then written by `bench leaderboard`:
# * results/primitives-scene: 3-D scene segmentation on the embedded rooms, `pape` against `sincos`
#   (the PaPE paper's indoor comparison), 4 epochs at batch 16, the task's default analyses;
# * results/hops: `synthetic-events` scene `hops` as spiking tokens (no-PE ceiling 1/8: the label is the
#   jump direction), `none` against `pape`, 2048 / 512 samples, 8 epochs at batch 64, no analyses.
set -euo pipefail
BENCH=${BENCH:-bench}
SEEDS=${SEEDS:-0,1,2}
COMMON=(--model vit-nano --workers 2 --preload --deterministic --no-progress-bar --seeds "$SEEDS")
echo "start $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD 2>/dev/null)" >> results/scene_hops_time.txt
"$BENCH" sweep --datasets primitives-scene --pes pape,sincos --out results/primitives-scene "${COMMON[@]}" \
  --epochs 4 --batch-size 16
"$BENCH" sweep --datasets synthetic-events --pes none,pape --out results/hops "${COMMON[@]}" \
  --data-option tokens=spiking --data-option scene=hops --data-option train_size=2048 \
  --data-option val_size=512 --epochs 8 --warmup-epochs 0.5 --batch-size 64 --analyses none
echo "end $(date -u +%FT%TZ)" >> results/scene_hops_time.txt
"$BENCH" leaderboard --results results/primitives-scene --reference sincos --out results/primitives-scene/LEADERBOARD.md --force
"$BENCH" leaderboard --results results/hops --reference none --out results/hops/LEADERBOARD.md --force
