# Sourced by the study scripts: the PEs they sweep, read from `bench list pes` (its markdown table) when they run.
#   pes_table BENCH            -> the table, once (each call starts a Python process)
#   image_pes "$table" [SKIP]  -> comma-separated PEs whose modalities include image (SKIP: one name left out)
#   additive_pes "$table"      -> comma-separated PEs whose `additive` column is yes (the alpha sweep scales those)
#   set_pes "$table" [SKIP]    -> comma-separated image PEs whose `token sets` column is yes (they apply to the
#                                 probe-set-* datasets: tokens at coordinates without a shared grid)
pes_table() { "$1" list pes; }
image_pes() {
  echo "$1" | awk -F'|' -v skip="${2:-}" \
    '$3 ~ /(^|[ ,])image([ ,]|$)/ {gsub(/ /, "", $2); if ($2 != skip) {printf "%s%s", s, $2; s=","}}'
}
additive_pes() { echo "$1" | awk -F'|' '$4 ~ /yes/ {gsub(/ /, "", $2); printf "%s%s", s, $2; s=","}'; }
set_pes() {
  echo "$1" | awk -F'|' -v skip="${2:-}" \
    '$3 ~ /(^|[ ,])image([ ,]|$)/ && $5 ~ /yes/ {gsub(/ /, "", $2); if ($2 != skip) {printf "%s%s", s, $2; s=","}}'
}
