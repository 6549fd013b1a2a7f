#!/usr/bin/env bash
# Issue 43, session 15 (branch s15h43b, BENCHMARKS.md "Session 15: the trace on 16 cores"): run
# through the device tool from a folder (the kit) holding gzipped `memscope` (the branch, with
# MEMSCOPE_PHASES timings), `memscope_main` (main's build, the "before") and
# `memscope_phases_before` (main plus the timings alone), `trace.json.gz` (../shared's
# trace_clean), `scale_trace.py`, `scale_trace_parallel.py` and `measure.sh` (bench/big43/).
# Makes the K-copy trace (default 2324: 9.166 GB), reads it twice with `cat`, then times main
# and the branch alternating (RUNS each, `taskset -c 0-15`, MEMSCOPE_THREADS unset), `cat`
# again, the md5 of both outputs, and one run of each instrumented binary with its phases
# (phases_before.txt, phases_after.txt); then, with SMALL_K set, the same pair on a SMALL_K-copy
# trace. results.tsv and log.txt go to $OUT.
set -u
D=$(cd "$(dirname "$0")" && pwd); OUT=${OUT:-/tmp/out}; W=${W:-/tmp/s15h43b}
K=${K:-2324}; RUNS=${RUNS:-2}
mkdir -p "$W/bench/big43" "$OUT"
for f in memscope memscope_main memscope_phases_before; do
  gzip -dc "$D/$f.gz" > "$W/$f" && chmod +x "$W/$f"
done
gzip -dc "$D/trace.json.gz" > "$W/trace.json"
cp "$D/scale_trace.py" "$W/bench/"; cp "$D/scale_trace_parallel.py" "$W/bench/big43/"
log() { echo "$(date -u +%T) $*" | tee -a "$OUT/log.txt"; }
. "$D/measure.sh"  # measure LABEL CMD... (rows to $OUT/results.tsv)
printf "label\twall_s\tpeak_rss_kib\trc\tuser_s\tsys_s\tstderr\n" > "$OUT/results.tsv"
log "cores $(nproc); $(grep -m1 'model name' /proc/cpuinfo); $(free -g | awk '/Mem/{print $2" GiB RAM"}'); $(df -h "$W" | tail -1)"
"$W/memscope" --version >> "$OUT/log.txt" 2>&1
t=$W/trace_x$K.json
measure gen_trace python3 "$W/bench/big43/scale_trace_parallel.py" "$W/trace.json" "$t" "$K"
ls -l "$t" >> "$OUT/log.txt"
measure cat1 sh -c "cat '$t' >/dev/null"
measure cat2 sh -c "cat '$t' >/dev/null"
for i in $(seq "$RUNS"); do
  measure "main_$i" sh -c "exec taskset -c 0-15 '$W/memscope_main' analyze --format json '$t' >'$W/out_main.json'"
  measure "s15h43b_$i" sh -c "exec taskset -c 0-15 '$W/memscope' analyze --format json '$t' >'$W/out_new.json'"
done
measure cat3 sh -c "cat '$t' >/dev/null"
md5sum "$W/out_main.json" "$W/out_new.json" | tee -a "$OUT/log.txt"
measure phases_after sh -c "MEMSCOPE_PHASES=1 exec taskset -c 0-15 '$W/memscope' analyze --format json '$t' 2>'$OUT/phases_after.txt' >/dev/null"
measure phases_before sh -c "MEMSCOPE_PHASES=1 exec taskset -c 0-15 '$W/memscope_phases_before' analyze --format json '$t' 2>'$OUT/phases_before.txt' >/dev/null"
rm -f "$t" "$W"/out_*.json
# SMALL_K (unset: skipped): the same on a trace of SMALL_K copies (232: 0.913 GB).
if [ -n "${SMALL_K:-}" ]; then
  t=$W/trace_x$SMALL_K.json
  measure gen_small python3 "$W/bench/big43/scale_trace_parallel.py" "$W/trace.json" "$t" "$SMALL_K"
  measure cat1_small sh -c "cat '$t' >/dev/null"
  measure cat2_small sh -c "cat '$t' >/dev/null"
  for i in $(seq "$RUNS"); do
    measure "main_small_$i" sh -c "exec taskset -c 0-15 '$W/memscope_main' analyze --format json '$t' >'$W/out_main.json'"
    measure "s15h43b_small_$i" sh -c "exec taskset -c 0-15 '$W/memscope' analyze --format json '$t' >'$W/out_new.json'"
  done
  md5sum "$W/out_main.json" "$W/out_new.json" | tee -a "$OUT/log.txt"
  rm -f "$t" "$W"/out_*.json
fi
log done
