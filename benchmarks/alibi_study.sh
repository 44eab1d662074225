#!/usr/bin/env bash
# ALiBi on the probes (pebench issue #32): the published slopes against the pebench variants of
# encodings/alibi.py (slope_scale, learnable_slopes), with the previous probe sweep's recipe (vit-probe,
# 2 epochs of 6400 scenes = 200 steps of 64, AdamW, warm-up 0.3 epoch then cosine, lr 5e-3 as
# in results/probe-sweep-200-steps/probe-lr), one run at a time (1 worker). RUNS lists variant:seeds; the default is what
# results/alibi-study holds: the published slopes once (seed 0, a check against results/probe-sweep-200-steps,
# whose 5 seeds of the same recipe are the published method's numbers) and slope_scale=8, seed 0.
# The planned rest (RUNS="scale8:1,2 learnable:0,1,2 scale8-learnable:0,1,2") did not fit the
# CPU share of the session that made the study (see results/alibi-study/REPORT.md).
# The target-* variants train with the probe sweep's new recipe instead (results/probe-recipe: a constant
# learning rate, validation every 25 steps, stop at 98 % or give up at step 400 within 5 points of chance,
# at most 1000 steps), seeds 0 and 1: the published slopes, slope_scale=8, learnable slopes, and the
# published slopes at a 5x smaller learning rate (the diagnosis saw the positional signal collapse once the
# learning rate peaked): RUNS="target-default:0,1 target-scale8:0,1 target-learnable:0,1 target-lr1e-3:0,1".
# target-cls reads the label from a CLS token instead of the mean over tokens (the hypothesis that mean
# pooling dilutes the one token that attends to the nearest glyph): RUNS="target-cls:0,1".
# Each variant has its own output root $OUT/alibi-study/<variant> (bench names run folders by PE,
# not by PE option). Complete runs are skipped, so a rerun resumes. Start/end times and the
# machine's load averages go to $OUT/alibi-study/study_time.txt. Then:
#   python -m benchmarks.strip_machine_paths --results $OUT/alibi-study
#   python -m benchmarks.alibi_findings --results $OUT/alibi-study --report $OUT/alibi-study/REPORT.md
# The mechanism measurements (results/alibi-study/diagnosis.json) come from
#   python -m benchmarks.alibi_diagnosis --out $OUT/alibi-study/diagnosis.json
set -euo pipefail
OUT=${OUT:-results}
BENCH=${BENCH:-bench}
PROBES=${PROBES:-probe-decay}
RUNS=${RUNS:-"default:0 scale8:0"}
# variant name -> --pe-option flags (empty: the published method)
declare -A OPTS=(
  [default]=""
  [scale8]="slope_scale=8"
  [learnable]="learnable_slopes=true"
  [scale8-learnable]="slope_scale=8 learnable_slopes=true"
  [target-default]=""
  [target-scale8]="slope_scale=8"
  [target-learnable]="learnable_slopes=true"
  [target-lr1e-3]=""
  [target-cls]=""
)
# variant name -> recipe flags added to RECIPE (later flags win)
TARGET=(--epochs 10 --lr-schedule constant --val-every 25 --stop-at 0.98 --give-up 400:0.55)
declare -A EXTRA=(
  [target-default]="${TARGET[*]}"
  [target-scale8]="${TARGET[*]}"
  [target-learnable]="${TARGET[*]}"
  [target-lr1e-3]="${TARGET[*]} --lr 1e-3"
  [target-cls]="${TARGET[*]} --class-token --pool cls"
)
RECIPE=(--model vit-probe --workers 1 --preload --deterministic --epochs 2 --warmup-epochs 0.3 --lr 5e-3
        --analyses none --no-progress-bar)
export OMP_NUM_THREADS=1
mkdir -p "$OUT/alibi-study"
load() { cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown; }
echo "start $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD 2>/dev/null) load $(load)" >> "$OUT/alibi-study/study_time.txt"
for probe in ${PROBES//,/ }; do
  for run in $RUNS; do
    v=${run%%:*} seeds=${run#*:}
    flags=()
    for o in ${OPTS[$v]}; do flags+=(--pe-option "$o"); done
    # shellcheck disable=SC2206
    extra=(${EXTRA[$v]:-})
    "$BENCH" sweep --datasets "$probe" --pes alibi --seeds "$seeds" --out "$OUT/alibi-study/$v" "${RECIPE[@]}" \
      "${flags[@]}" "${extra[@]}"
  done
done
echo "end $(date -u +%FT%TZ) load $(load)" >> "$OUT/alibi-study/study_time.txt"
