#!/usr/bin/env bash
# The committed probe sweep (README "Probes"), in two stages on 2 worker processes of 1 thread each:
#   1. learning-rate selection: every PE at each learning rate of LRS on probe-decay (a probe every PE
#      can learn in principle), held-out seed 100, validation split;
#   2. the sweep: PROBES x PEs x seeds 0..4, each PE at its chosen learning rate
#      (benchmarks/probe_findings.py --choose-lr: best validation accuracy, the smallest learning rate
#      unless a larger one beats it by 2 points).
# Complete runs with the same configuration are skipped, so a rerun resumes. Then:
#   python benchmarks/probe_findings.py --results $OUT/embedded --lr-results $OUT/probe-lr
#   bench leaderboard --results $OUT/embedded --reference rope-axial
set -euo pipefail
OUT=${OUT:-results}
WORKERS=${WORKERS:-2}
LRS=${LRS:-"5e-3 1.5e-2"}
PROBES=${PROBES:-probe-translation,probe-rotation,probe-context,probe-extrapolation,probe-decay,probe-anchoring}
SEEDS=${SEEDS:-0,1,2,3,4}
SELECT_PES=${SELECT_PES:-none,ape,sincos,rope-axial,rope-mixed,lookhere,alibi,pape,pape-ri}
PES=${PES:-ape,sincos,rope-axial,rope-mixed,lookhere,alibi,pape,pape-ri}
RECIPE=(--model vit-probe --workers "$WORKERS" --deterministic --epochs 2 --warmup-epochs 0.3)

for lr in $LRS; do
  bench sweep --datasets probe-decay --pes "$SELECT_PES" --seeds 100 --out "$OUT/probe-lr/lr$lr" "${RECIPE[@]}" --lr "$lr" \
    --analyses none
done
declare -A GROUP
while read -r pe lr; do
  case ",$PES," in *",$pe,"*) GROUP[$lr]="${GROUP[$lr]:+${GROUP[$lr]},}$pe" ;; esac
done < <(python benchmarks/probe_findings.py --choose-lr "$OUT/probe-lr")
for probe in ${PROBES//,/ }; do  # probe by probe: a sweep stopped early leaves whole probes
  analyses=none; [ "$probe" = probe-anchoring ] && analyses=geometry  # SSDC / RPI where content alone gives 50 %
  for lr in "${!GROUP[@]}"; do
    bench sweep --datasets "$probe" --pes "${GROUP[$lr]}" --seeds "$SEEDS" --out "$OUT/embedded" "${RECIPE[@]}" --lr "$lr" \
      --analyses "$analyses"
  done
done
