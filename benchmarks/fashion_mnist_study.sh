#!/usr/bin/env bash
# Study 1 (issue #43 item 4; results/embedded/fashion-mnist/REPORT.md): Fashion-MNIST x every registered PE that applies to
# images (read from `bench list pes` when the script runs) x seeds 0-4, one recipe for all, plus random-permutation
# training (RPT_PES, run directories <pe>+rpt), on 2 worker processes of 1 thread each (--preload, --deterministic).
# A rerun skips complete runs, so an interrupted study resumes.
#
# Recipe (see the report's protocol). Sizing: the 1-epoch (300-step) pilot ended none / ape at 58.7 / 57.5 % test
# accuracy and still rising (val 49 -> 60 % between steps 150 and 300); 2 epochs (600 steps) reached 71.7 / 74.4 % for
# ape seeds 0 / 1 (not yet flat either) at 223 s per run on a machine shared with other jobs, i.e. roughly 70-80 min
# for the 80 runs on 2 idle workers: run it in a session of its own.
#   vit-probe (2 blocks, width 64, the probe sweep's model), 24 px inputs: the 28 px images resized to 24 x 24
#   (bilinear, antialiased: the datamodule's --resolution rule) with patch 4, a 6 x 6 token grid, so that 1.5x = 36 px
#   (9 x 9) and 2x = 48 px (12 x 12) are whole token grids (28 x 1.5 = 42 is not a multiple of 4);
#   a fixed training subset of TRAIN_PER_CLASS images per class (1,920: 19,200 images, drawn with the split seed,
#   the same for every run; --data-option train_per_class, so the runs are not --limit-train-batches smoke runs),
#   EPOCHS epoch(s) of batch 64 (300 steps each), AdamW, lr LR, linear warm-up over WARMUP epochs then cosine to 0;
#   validation hold-out: 200 images per class (2,000; seeded, the same for every run), evaluated every 150 steps;
#   the last step's weights are tested on t10k (10,000 images).
# Analyses on the hold-out: extrapolation at 24 / 36 / 48 px (each PE's own rule, 1,000 images), robustness
# (fragility FS = 1 - A_shift / A_clean under JPEG q5 and blur sigma 2.5, 1,000 images), geometry (SSDC and SSDC
# under RPI per layer, K = 8 permutations, 256-image probe, the untrained twin's null band) and, for the additive PEs
# (the `additive` column of `bench list pes`), the alpha sweep (on 500 images).
# BENCH is the bench executable; PES / SEEDS / RPT_PES / WORKERS override the grid (the pilot: PES=none,ape SEEDS=0).
# The runs go to $OUT/fashion-mnist/<pe>/vit-probe/seed<S> (OUT=results/embedded: the committed leaderboard's
# folder, so LEADERBOARD.md includes them); start and end times go to $OUT/fashion-mnist/study_time.txt; the runs'
# machine paths are made relative to $OUT at the end (benchmarks/strip_machine_paths.py). Then:
#   python -m benchmarks.fashion_mnist_findings --results $OUT/fashion-mnist --report $OUT/fashion-mnist/REPORT.md
set -euo pipefail
OUT=${OUT:-results/embedded}
STUDY=$OUT/fashion-mnist
BENCH=${BENCH:-bench}
WORKERS=${WORKERS:-2}
SEEDS=${SEEDS:-0,1,2,3,4}
RPT_PES=${RPT_PES-ape}  # RPT variants (RPT_PES= for none): the additive PE the alpha sweep scales (more cost 5 runs each)
LR=${LR:-3e-3}
WARMUP=${WARMUP:-0.1}
EPOCHS=${EPOCHS:-2}
TRAIN_PER_CLASS=${TRAIN_PER_CLASS:-1920}
# every registered PE whose modalities include image, and which of them are additive (bench list pes' table)
. "$(dirname "$0")/registry_pes.sh"
table=$(pes_table "$BENCH")
PES=${PES:-$(image_pes "$table")}
ADDITIVE=$(additive_pes "$table")
[ -n "$PES" ] || { echo "fashion_mnist_study: no PE applies to images in \`$BENCH list pes\`" >&2; exit 2; }
RECIPE=(--model vit-probe --workers "$WORKERS" --preload --deterministic --no-progress-bar
        --resolution 24 --data-option val_per_class=200 --data-option train_per_class="$TRAIN_PER_CLASS"
        --batch-size 64 --epochs "$EPOCHS" --val-every 150 --lr "$LR" --lr-schedule cosine --warmup-epochs "$WARMUP"
        --extrapolation-resolutions 24,36,48
        --analysis-option extrapolation_samples=1000 --analysis-option robustness_samples=1000
        --analysis-option alpha_samples=500)
additive() { case ",$ADDITIVE," in *",${1%+rpt},"*) return 0 ;; esac; return 1; }

mkdir -p "$STUDY"
echo "start $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD 2>/dev/null)" >> "$STUDY/study_time.txt"
add= other=
for pe in ${PES//,/ }; do
  if additive "$pe"; then add=${add:+$add,}$pe; else other=${other:+$other,}$pe; fi
done
for pe in ${RPT_PES//,/ }; do
  if additive "$pe"; then add=${add:+$add,}$pe+rpt; else other=${other:+$other,}$pe+rpt; fi
done
[ -z "$add" ] || "$BENCH" sweep --datasets fashion-mnist --pes "$add" --seeds "$SEEDS" --out "$OUT" "${RECIPE[@]}" \
  --analyses geometry,robustness,extrapolation,alpha
[ -z "$other" ] || "$BENCH" sweep --datasets fashion-mnist --pes "$other" --seeds "$SEEDS" --out "$OUT" "${RECIPE[@]}" \
  --analyses geometry,robustness,extrapolation
echo "end $(date -u +%FT%TZ)" >> "$STUDY/study_time.txt"
python -m benchmarks.strip_machine_paths --results "$STUDY"
