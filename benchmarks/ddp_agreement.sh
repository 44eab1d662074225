#!/usr/bin/env bash
# DDP against one process (pebench issue #32, item 5; results/ddp-agreement/REPORT.md): the default
# `bench run` configuration of its time (shapes / pape / vit-nano, 4 epochs -- pinned: the default is now 3 --,
# batch 64) with --deterministic on CPU, once in one process and once in 2 gloo processes (--devices 2
# --strategy ddp), for each seed in SEEDS.
# Analyses are off (they run after training and do not change val/acc1). One run at a time, one thread
# per process. Complete runs with the same configuration are skipped, so a rerun resumes. Then:
#   python -m benchmarks.strip_machine_paths --results $OUT
#   python -m benchmarks.ddp_findings --results $OUT --report $OUT/REPORT.md
set -euo pipefail
OUT=${OUT:-results/ddp-agreement}
SEEDS=${SEEDS:-"0 1 2 3 4"}
BENCH=${BENCH:-bench}
export OMP_NUM_THREADS=1
COMMON=(--epochs 4 --deterministic --analyses none --no-progress-bar --accelerator cpu)
for seed in $SEEDS; do
  "$BENCH" run --seed "$seed" "${COMMON[@]}" --out "$OUT/one-process"
  "$BENCH" run --seed "$seed" "${COMMON[@]}" --devices 2 --strategy ddp --out "$OUT/ddp-2"
done
