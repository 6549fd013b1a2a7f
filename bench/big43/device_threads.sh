#!/usr/bin/env bash
# Issue 43, branch s13h43c (BENCHMARKS.md "The analysis side by side, and the 10 GB trace"):
# run through the device tool from a folder holding gzipped memscope, memscope_base (an older
# build), memscope_instr (optional), scale_snapshot, trace.json, snapshot.pickle and bench/
# (scale_trace.py, big43/scale_trace_parallel.py); PLAN picks the steps (t<GB>: a trace,
# s<K>: a snapshot of K copies), LIMIT the seconds; results.tsv and log.txt go to $OUT; measure.sh (bench/big43/) must lie beside this script.
set -u
D=$(cd "$(dirname "$0")" && pwd); OUT=${OUT:-/tmp/out}; W=/tmp/big43c
mkdir -p "$W" "$OUT"
# The carried files are gzipped (the call's tree is limited to 64 MiB): unpacked into $W.
for f in memscope memscope_base memscope_instr scale_snapshot trace.json snapshot.pickle; do gzip -dc "$D/$f.gz" > "$W/$f"; done
chmod +x "$W"/memscope "$W"/memscope_base "$W"/memscope_instr "$W"/scale_snapshot
mkdir -p "$W/bench/big43"; cp "$D/bench/scale_trace.py" "$W/bench/"; cp "$D/bench/big43/scale_trace_parallel.py" "$W/bench/big43/"
D=$W
T0=$(date +%s)
log() { echo "$(date -u +%T) $*" | tee -a "$OUT/log.txt"; }
left() { echo $(( ${LIMIT:-400} - ($(date +%s) - T0) )); }
. "$(dirname "$0")/measure.sh"  # measure LABEL CMD...
printf "label\twall_s\tpeak_rss_kib\trc\tuser_s\tsys_s\tstderr\n" > "$OUT/results.tsv"
log "cores $(nproc); $(grep -m1 'model name' /proc/cpuinfo); $(free -g | awk '/Mem/{print $2" GiB RAM"}'); $(df -h $W | tail -1)"
"$D/memscope" --version >> "$OUT/log.txt" 2>&1
python3 -c "import orjson" 2>/dev/null && ORJ=1 || ORJ=0; log "orjson $ORJ"
src_mb=$(python3 -c "import os;print(os.path.getsize('$D/trace.json')/1e6)")
trace() {  # trace GB: generate, cat twice, memscope (threads all, 8, 1 on small), base
  local gb=$1 k t
  k=$(python3 -c "print(max(1, round($gb*1000/$src_mb)))"); t=$W/trace_${gb}gb.json
  measure "gen_trace_${gb}gb" python3 "$D/bench/big43/scale_trace_parallel.py" "$D/trace.json" "$t" "$k"
  ls -l "$t" >> "$OUT/log.txt"
  measure "cat1_trace_${gb}gb" sh -c "cat '$t' >/dev/null"
  measure "cat2_trace_${gb}gb" sh -c "cat '$t' >/dev/null"
  measure "memscope_trace_${gb}gb" sh -c "exec '$D/memscope' analyze --format json '$t' >'$OUT/trace_${gb}gb.json'"
  measure "memscope_t8_trace_${gb}gb" sh -c "MEMSCOPE_THREADS=8 exec '$D/memscope' analyze --format json '$t' >'$OUT/trace_${gb}gb_t8.json'"
  sh -c "'$D/memscope_instr' analyze --format json '$t' >/dev/null 2>'$OUT/phases_trace_${gb}gb.txt'"
  measure "base_trace_${gb}gb" sh -c "exec '$D/memscope_base' analyze --format json '$t' >'$OUT/trace_${gb}gb_base.json'"
  if [ "$gb" = 1 ] && [ "${SLOW:-1}" = 1 ]; then
    measure "memscope_t1_trace_${gb}gb" sh -c "MEMSCOPE_THREADS=1 exec '$D/memscope' analyze --format json '$t' >'$OUT/trace_${gb}gb_t1.json'"
    measure "json_load_trace_${gb}gb" python3 -c "import json,sys;json.load(open(sys.argv[1],'rb'))" "$t"
    [ $ORJ = 1 ] && measure "orjson_trace_${gb}gb" python3 -c "import orjson,sys;orjson.loads(open(sys.argv[1],'rb').read())" "$t"
  fi
  for f in "$OUT"/trace_${gb}gb*.json; do md5sum "$f" >> "$OUT/log.txt"; done
  rm -f "$t"
}
snap() {  # snapshot of K copies: threads all vs 1
  local k=$1 f=$W/snap_x$1.pickle
  measure "gen_snap_x$k" "$D/scale_snapshot" "$D/snapshot.pickle" "$f" "$k"
  ls -l "$f" >> "$OUT/log.txt"
  measure "cat2_snap_x$k" sh -c "cat '$f' >/dev/null; cat '$f' >/dev/null"
  measure "memscope_snap_x$k" sh -c "exec '$D/memscope' analyze --format json '$f' >'$OUT/snap_x$k.json'"
  measure "memscope_t1_snap_x$k" sh -c "MEMSCOPE_THREADS=1 exec '$D/memscope' analyze --format json '$f' >'$OUT/snap_x${k}_t1.json'"
  measure "base_snap_x$k" sh -c "exec '$D/memscope_base' analyze --format json '$f' >'$OUT/snap_x${k}_base.json'"
  md5sum "$OUT"/snap_x$k*.json >> "$OUT/log.txt"; rm -f "$OUT"/snap_x$k*.json
  rm -f "$f"
}
for s in ${PLAN:-t10 t1 s90 t3 s180}; do
  [ "$(left)" -gt 60 ] || { log "skip $s: $(left) s left"; continue; }
  case $s in t*) trace "${s#t}" ;; s*) snap "${s#s}" ;; esac
done
rm -f "$OUT"/trace_*gb_*.json
log "done, $(( $(date +%s) - T0 )) s"
