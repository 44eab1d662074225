#!/usr/bin/env bash
# The committed probe sweep (results/embedded/REPORT.md), in two stages on 2 worker processes of 1 thread each:
#   1. learning-rate selection: every PE at each learning rate of LRS on probe-decay (a probe every PE
#      can learn in principle), held-out seed 100, validation split;
#   2. the sweep: PROBES x PEs x seeds 0..4, each PE at its chosen learning rate
#      (benchmarks/probe_findings.py --choose-lr: best validation accuracy, the smallest learning rate
#      unless a larger one beats it by 2 points).
#   3. probe-anchoring, the SSDC study's setting, also without a PE (`none`: content alone gives 50 %) and
#      with random-permutation training (ANCHOR_RPT, each at its PE's learning rate).
# Analyses: extrapolation on probe-extrapolation (the same scene upsampled), geometry + robustness + alpha
# on probe-anchoring (SSDC / RPI, FS under JPEG and blur; the alpha sweep for ADDITIVE PEs), none elsewhere.
# BENCH is the bench executable (e.g. one installed from a worktree at the sweep's commit).
# Complete runs with the same configuration are skipped, so a rerun resumes. The start and end times
# go to $OUT/probe_sweep_time.txt (results/embedded/REPORT.md quotes the measured wall time). Then:
#   python benchmarks/probe_findings.py --results $OUT/embedded --lr-results $OUT/probe-lr \
#       --report $OUT/embedded/REPORT.md --lr-report $OUT/probe-lr/REPORT.md
#   bench leaderboard --results $OUT/embedded --reference rope-axial,none
set -euo pipefail
OUT=${OUT:-results}
WORKERS=${WORKERS:-2}
LRS=${LRS:-"5e-3 1.5e-2"}
PROBES=${PROBES:-probe-translation,probe-rotation,probe-context,probe-extrapolation,probe-decay,probe-anchoring}
SEEDS=${SEEDS:-0,1,2,3,4}
SELECT_PES=${SELECT_PES:-none,ape,sincos,rope-axial,rope-mixed,lookhere,alibi,pape,pape-ri}
PES=${PES:-ape,sincos,rope-axial,rope-mixed,lookhere,alibi,pape,pape-ri}
ANCHOR_RPT=${ANCHOR_RPT:-sincos,rope-axial,pape}
BENCH=${BENCH:-bench}
ADDITIVE=${ADDITIVE:-ape,sincos}  # PEs added to the tokens, which the alpha sweep scales (bench list pes)
# --preload: each worker imports torch/Lightning once and forks its runs (about 7 s saved per run)
RECIPE=(--model vit-probe --workers "$WORKERS" --preload --deterministic --epochs 2 --warmup-epochs 0.3
        --no-progress-bar)

mkdir -p "$OUT"
echo "start $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD 2>/dev/null)" >> "$OUT/probe_sweep_time.txt"
for lr in $LRS; do
  "$BENCH" sweep --datasets probe-decay --pes "$SELECT_PES" --seeds 100 --out "$OUT/probe-lr/lr$lr" "${RECIPE[@]}" --lr "$lr" \
    --analyses none
done
declare -A GROUP
while read -r pe lr; do
  case ",$PES," in *",$pe,"*) GROUP[$lr]="${GROUP[$lr]:+${GROUP[$lr]},}$pe" ;; esac
done < <(python benchmarks/probe_findings.py --choose-lr "$OUT/probe-lr")
additive() { case ",$ADDITIVE," in *",$1,"*) return 0 ;; esac; return 1; }
lr_of() { python benchmarks/probe_findings.py --choose-lr "$OUT/probe-lr" | awk -v pe="$1" '$1 == pe {print $2}'; }
for probe in ${PROBES//,/ }; do  # probe by probe: a sweep stopped early leaves whole probes
  EXTRA=()
  [ "$probe" = probe-extrapolation ] && EXTRA=(--analysis-option extrapolation_samples=256)  # 5 seeds: 1280 scenes
  case "$probe" in
    probe-extrapolation) analyses=extrapolation ;;  # with EXTRA below: 256 upsampled scenes per size
    probe-anchoring) analyses=geometry,robustness ;;  # content alone gives 50 %: FS and RPI stay defined
    *) analyses=none ;;
  esac
  for lr in "${!GROUP[@]}"; do
    add= other=  # the alpha sweep applies to additive PEs only
    for pe in ${GROUP[$lr]//,/ }; do
      if [ "$probe" = probe-anchoring ] && additive "$pe"; then add=${add:+$add,}$pe; else other=${other:+$other,}$pe; fi
    done
    [ -z "$add" ] || "$BENCH" sweep --datasets "$probe" --pes "$add" --seeds "$SEEDS" --out "$OUT/embedded" \
      "${RECIPE[@]}" --lr "$lr" --analyses "$analyses,alpha" "${EXTRA[@]}"
    [ -z "$other" ] || "$BENCH" sweep --datasets "$probe" --pes "$other" --seeds "$SEEDS" --out "$OUT/embedded" \
      "${RECIPE[@]}" --lr "$lr" --analyses "$analyses" "${EXTRA[@]}"
  done
  if [ "$probe" = probe-anchoring ]; then  # the ablated model and RPT-trained variants
    for pe in none ${ANCHOR_RPT//,/ }; do
      variant=$pe; [ "$pe" = none ] || variant=$pe+rpt
      a=$analyses; additive "$pe" && a=$a,alpha
      "$BENCH" sweep --datasets "$probe" --pes "$variant" --seeds "$SEEDS" --out "$OUT/embedded" "${RECIPE[@]}" \
        --lr "$(lr_of "$pe")" --analyses "$a"
    done
  fi
done
echo "end $(date -u +%FT%TZ)" >> "$OUT/probe_sweep_time.txt"
