#!/usr/bin/env bash
# Runs memscope beside the Python baselines on the same files and prints a Markdown table
# (wall seconds, peak RSS) with ratios. Usage: bench/run.sh FILE...
# Baselines: Python's pickle.load (snapshots), json / orjson (traces) when importable.
# MEMSCOPE_ONLY=1 skips the baselines (they take minutes on gigabyte inputs).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
BIN="${CARGO_TARGET_DIR:-target}/release/memscope"
measure() { # prints "seconds max_rss_kb" for the command, best of 3 wall times
  local best="" rss=0
  for _ in 1 2 3; do
    local out tmp
    tmp=$(mktemp)
    /usr/bin/time -f "%e %M" -o "$tmp" "$@" >/dev/null 2>&1 || true
    out=$(tail -1 "$tmp")
    rm -f "$tmp"
    local t=${out% *} m=${out#* }
    if [ -z "$best" ] || awk "BEGIN{exit !($t < $best)}"; then best=$t; fi
    [ "$m" -gt "$rss" ] && rss=$m
  done
  echo "$best $rss"
}
echo "| file | size | memscope analyze | peak RSS | baseline | baseline time | baseline RSS | speed-up |"
echo "|---|---|---|---|---|---|---|---|"
for f in "$@"; do
  size=$(stat -c %s "$f")
  read -r mt mr < <(measure "$BIN" analyze "$f")
  if [ -n "${MEMSCOPE_ONLY:-}" ]; then
    printf "| %s | %.1f MiB | %.2f s | %.0f MiB (%.2fx file) | | | | |\n" \
      "$(basename "$f")" "$(echo "$size/1048576" | bc -l)" "$mt" "$(echo "$mr/1024" | bc -l)" "$(echo "$mr*1024/$size" | bc -l)"
    continue
  fi
  case "$f" in
    *.pickle|*.pickle.gz)
      base="python3 pickle.load"
      read -r bt br < <(measure python3 -c 'import pickle,sys,gzip; o=gzip.open if sys.argv[1].endswith(".gz") else open; pickle.load(o(sys.argv[1],"rb"))' "$f") ;;
    *)
      if python3 -c 'import orjson' 2>/dev/null; then
        base="python3 orjson.loads"
        read -r bt br < <(measure python3 -c 'import orjson,sys,gzip; o=gzip.open if sys.argv[1].endswith(".gz") else open; orjson.loads(o(sys.argv[1],"rb").read())' "$f")
      else
        base="python3 json.load"
        read -r bt br < <(measure python3 -c 'import json,sys,gzip; o=gzip.open if sys.argv[1].endswith(".gz") else open; json.load(o(sys.argv[1],"rb"))' "$f")
      fi ;;
  esac
  printf "| %s | %.1f MiB | %.2f s | %.0f MiB (%.2fx file) | %s | %.2f s | %.0f MiB | %.1fx |\n" \
    "$(basename "$f")" "$(echo "$size/1048576" | bc -l)" "$mt" "$(echo "$mr/1024" | bc -l)" "$(echo "$mr*1024/$size" | bc -l)" \
    "$base" "$bt" "$(echo "$br/1024" | bc -l)" "$(echo "$bt/$mt" | bc -l)"
done
