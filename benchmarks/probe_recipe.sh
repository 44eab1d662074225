#!/usr/bin/env bash
# The probe recipe study (results/probe-recipe/REPORT.md): the cells of the committed probe sweep that its
# 200-step cosine recipe left bimodal or unlearned (and, for the cost, cells it learned), trained under candidate
# recipes that validate every 25 steps and end a run at its validation target, so that each seed's steps to
# learn are measured:
#   constant-5e-3:     AdamW at a constant 5e-3 after a 0.3-epoch warm-up, at most 10 epochs (1000 steps of 64),
#                      stop at val/acc1 > 0.98. (A constant rate makes a run's first t steps the same whatever
#                      the budget, so "not learned within N steps" is a truncation, not a different schedule.)
#   constant-5e-3-b32: the same with batches of 32 (a step costs about half; 1000 steps = 5 epochs): does a PE
#                      learn in about as many steps with half the batch? A pilot: rope-axial on probe-context,
#                      seed 0 only (stopped there to leave the CPU to the main recipe).
# One run per worker process, one thread each, --deterministic. BENCH: the bench executable at the study's
# commit. Complete runs are skipped, so a rerun resumes. Then:
#   python -m benchmarks.probe_recipe --results $OUT/probe-recipe --baseline $OUT/embedded \
#       --report $OUT/probe-recipe/REPORT.md
set -euo pipefail
OUT=${OUT:-results}
WORKERS=${WORKERS:-2}
SEEDS=${SEEDS:-0,1,2}
BENCH=${BENCH:-bench}
RECIPE=(--model vit-probe --workers "$WORKERS" --preload --deterministic --no-progress-bar --analyses none
        --warmup-epochs 0.3 --epochs 10 --val-every 25 --stop-at 0.98)
cells() {  # probe PEs: the cells the committed sweep left bimodal or unlearned, then cells it learned in every
          # seed (what a learned cell costs under the recipe) and APE, which learned almost nothing in 200 steps
  echo "probe-context rope-axial,pape,lookhere"
  echo "probe-decay rope-axial,pape-ri,sincos"
  echo "probe-translation rope-mixed,pape"
  echo "probe-rotation sincos"
  echo "probe-decay ape"
}
while read -r probe pes; do
  "$BENCH" sweep --datasets "$probe" --pes "$pes" --seeds "$SEEDS" --out "$OUT/probe-recipe/constant-5e-3" \
    "${RECIPE[@]}" --lr 5e-3 --lr-schedule constant
done < <(cells)
"$BENCH" sweep --datasets probe-context --pes rope-axial --seeds 0 \
  --out "$OUT/probe-recipe/constant-5e-3-b32" "${RECIPE[@]}" --epochs 5 --batch-size 32 --lr 5e-3 --lr-schedule constant
