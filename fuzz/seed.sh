#!/usr/bin/env bash
# Builds the seed corpora of the fuzz targets from the project's fixtures and, when present,
# small slices of ../shared/corpus. Run from the repository root: `bash fuzz/seed.sh`.
set -euo pipefail
cd "$(dirname "$0")/.."
c=fuzz/corpus
mkdir -p "$c/pickle" "$c/snapshot" "$c/trace"
for f in fixtures/unit/*.pickle fixtures/unit/hostile/*.pickle fixtures/unit/regressions/*.pickle; do
  [ -f "$f" ] || continue
  cp "$f" "$c/pickle/"; cp "$f" "$c/snapshot/"
done
# Small real captures (libFuzzer's -max_len keeps inputs short; the start of a file is what it mutates).
for f in fixtures/*.pickle ../shared/corpus/snapshots/*.pickle; do
  [ -f "$f" ] || continue
  n=$(stat -c %s "$f")
  if [ "$n" -le 200000 ]; then cp "$f" "$c/snapshot/"; fi
done
# Traces: the small fixtures whole, and the first 64 KiB of shared ones (a cut trace is a valid input too).
for f in fixtures/*.trace.json fixtures/unit/regressions/*.json; do
  [ -f "$f" ] || continue
  head -c 65536 "$f" > "$c/trace/$(basename "$f")"
done
for f in fixtures/*.trace.json.gz; do
  [ -f "$f" ] || continue
  gzip -dc "$f" | head -c 65536 > "$c/trace/$(basename "$f" .gz)" || true
done
if [ -d ../shared/corpus/traces ]; then
  find ../shared/corpus/traces -name '*.json' -size -2M | head -20 | while read -r f; do
    head -c 65536 "$f" > "$c/trace/$(echo "$f" | tr / _)"
  done
  find ../shared/corpus/traces -name '*.json.gz' | head -20 | while read -r f; do
    gzip -dc "$f" 2>/dev/null | head -c 65536 > "$c/trace/$(echo "$f" | tr / _ | sed 's/\.gz$//')" || true
  done
fi
# query_render: result sets with hostile text cells (kind byte 3), numbers and nulls, 0xff between cells.
mkdir -p "$c/query_render"
printf '\x03\x03=HYPERLINK(1)\xff\x01\x05\xff\x03\x1b]0;t\x07\xff\x00\xff\x03\xc2\x9b,"\r\n\xff\x02\x01' > "$c/query_render/hostile"
ls "$c"/* | wc -l
