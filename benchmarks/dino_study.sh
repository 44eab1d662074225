#!/usr/bin/env bash
# The committed DINO / EED study (results/dino/REPORT.md, written by benchmarks/dino_findings.py):
# `--task dino` on the embedded texture-centric and object-centric sets, the PEs none, ape, sincos,
# rope-axial and pape, seeds 0-2, vit-nano (4 blocks), 4 epochs of 32 steps at batch 64, on 2 worker
# processes of 1 thread each. The recipe is the one measured to raise k-NN on `textures` in CPU minutes
# (results/dino/REPORT.md: departures from the official recipe): every crop grayscale, milder crops, teacher
# temperature 0.04 throughout, teacher momentum 0.99 -> 1, peak lr 1e-3, head 512-512-128 -> 1024.
# EED / SSDC per layer at initialisation and after every epoch. A rerun skips complete runs.
# Each run records the commit checked out when it starts: to keep committing while the study runs,
# run it from a worktree of one commit with its own editable install (git worktree add; python -m venv
# --system-site-packages; pip install --no-deps -e <worktree>; BENCH=<venv>/bin/bench), as the
# findings report every commit the runs were made at.
# Then: python -m benchmarks.dino_findings --results $OUT/dino --report results/dino/REPORT.md --png docs/dino_eed.png
set -euo pipefail
OUT=${OUT:-results}
BENCH=${BENCH:-bench}
PES=${PES:-none,ape,sincos,rope-axial,pape}
SEEDS=${SEEDS:-0,1,2}
SETS=${SETS:-textures,objects}
RECIPE=(--model vit-nano --workers 2 --preload --deterministic --epochs 4 --batch-size 64 --lr 0.004 --warmup-epochs 1
        --drop-path 0 --analyses none --no-progress-bar --task dino
        --task-option n_local=4 --task-option "global_scale=[0.6,1.0]" --task-option "local_scale=[0.3,0.6]"
        --task-option "colour_jitter=[0.4,0.4,0.2,0.1]" --task-option grayscale_p=1.0
        --task-option teacher_temp=0.04 --task-option warmup_teacher_temp=0.04 --task-option momentum_teacher=0.99
        --task-option out_dim=1024 --task-option head_hidden=512 --task-option head_bottleneck=128
        --task-option eed_every=1)
mkdir -p "$OUT"
echo "start $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD 2>/dev/null)" >> "$OUT/dino_study_time.txt"
status=0
for ds in ${SETS//,/ }; do  # a set with failed runs does not stop the next one
  "$BENCH" sweep --datasets "$ds" --pes "$PES" --seeds "$SEEDS" --out "$OUT/dino" "${RECIPE[@]}" || status=$?
done
echo "end $(date -u +%FT%TZ) exit $status" >> "$OUT/dino_study_time.txt"
exit "$status"
