#!/usr/bin/env bash
# Issue 43, two binaries side by side on the GPU host (run through the device tool):
#
#   bench/big43/pair.sh DIR OUT
#
# DIR holds `memscope` (after) and `memscope_before`, the release `scale_snapshot` example, a real
# snapshot (`snapshot.pickle`), a real profiler trace (`trace.json`), `big_allstacks.pickle` or its `.xz` (the
# issue's own 2-core file, `fixtures/generate.py big_allstacks`) and `scale_trace_parallel.py` with
# `scale_trace.py` beside it (found through PYTHONPATH). OUT receives `results.tsv` (label, wall s, peak RSS KiB, exit code,
# user s, sys s, stderr's end) and `log.txt`. Order, most important first (a call may be cut):
#   1. big_allstacks on 2 cores (`taskset -c 0-1`) and on 16: after, before, `pickle.load`,
#      alternating, RUNS times each;
#   2. a 1 GiB snapshot (x383 of snapshot.pickle) on 16 cores, after and before, alternating; with
#      the release `probe` example in DIR, its phase times on 1 and 16 threads;
#   3. a TRACE_GB trace on 16 cores: `cat` twice, after, before, and after with MALLOC_ARENA_MAX=4;
#   4. the address-space check: a ~90 MB trace with 16 threads under `prlimit --as` LIMITS bytes,
#      default arenas against MALLOC_ARENA_MAX=4;
#   5. a SNAP_GIB snapshot (unset: skipped), after only.
set -u
D=$(readlink -f "$1"); OUT=$(readlink -f "$2"); W=${W:-/tmp/pair43}
A=$D/memscope; B=$D/memscope_before; RUNS=${RUNS:-3}
mkdir -p "$W" "$OUT"
log() { echo "$(date -u +%T) $*" | tee -a "$OUT/log.txt"; }
. "$(dirname "$0")/measure.sh"  # measure LABEL CMD...
log "cores $(nproc); $(grep -m1 'model name' /proc/cpuinfo); $("$A" --version); before $("$B" --version)"
f=$D/big_allstacks.pickle
[ -f "$f" ] || { xz -dc "$f.xz" >"$W/big_allstacks.pickle"; f=$W/big_allstacks.pickle; }
cat "$f" >/dev/null
for cores in 0-1 0-15; do
  for i in $(seq "$RUNS"); do
    measure "after_${cores}_allstacks" taskset -c $cores "$A" analyze --format json "$f"
    measure "before_${cores}_allstacks" taskset -c $cores "$B" analyze --format json "$f"
  done
  measure "pickle_load_${cores}_allstacks" taskset -c $cores python3 -c "import pickle,sys;pickle.load(open(sys.argv[1],'rb'))" "$f"
done
"$A" analyze --format json "$f" | md5sum >>"$OUT/log.txt"; "$B" analyze --format json "$f" | md5sum >>"$OUT/log.txt"
s=$W/snap_1g.pickle
measure gen_snap_1g "$D/scale_snapshot" "$D/snapshot.pickle" "$s" "${SNAP1_K:-383}"
cat "$s" >/dev/null; measure cat2_snap_1g sh -c "cat '$s' >/dev/null"
for i in 1 2; do
  measure after16_snap_1g taskset -c 0-15 "$A" analyze --format json "$s"
  measure before16_snap_1g taskset -c 0-15 "$B" analyze --format json "$s"
done
if [ -x "$D/probe" ]; then  # phase times (load, replay, steps, leaks, whole analysis) on 1 and 16 threads
  for th in 1 16; do
    log "probe MEMSCOPE_THREADS=$th"; MEMSCOPE_THREADS=$th taskset -c 0-15 "$D/probe" "$s" 2>&1 | grep -v '^after' | tee -a "$OUT/log.txt"
  done
fi
rm -f "$s"
t=$W/trace.json
k=$(python3 -c "import os;print(max(1, round(${TRACE_GB:-10}*1e9/os.path.getsize('$D/trace.json'))))")
measure gen_trace env PYTHONPATH="$D" python3 "$D/scale_trace_parallel.py" "$D/trace.json" "$t" "$k"
measure cat1_trace sh -c "cat '$t' >/dev/null"; measure cat2_trace sh -c "cat '$t' >/dev/null"
measure after16_trace taskset -c 0-15 "$A" analyze --format json "$t"
measure before16_trace taskset -c 0-15 "$B" analyze --format json "$t"
measure after16_trace_arena4 env MALLOC_ARENA_MAX=4 taskset -c 0-15 "$A" analyze --format json "$t"
measure after16b_trace taskset -c 0-15 "$A" analyze --format json "$t"
rm -f "$t"
t=$W/trace90.json
env PYTHONPATH="$D" python3 "$D/scale_trace_parallel.py" "$D/trace.json" "$t" 23 >/dev/null
for lim in ${LIMITS:-600000000 1000000000 1500000000}; do
  measure "as_${lim}_default" env MEMSCOPE_THREADS=16 prlimit --as=$lim "$A" analyze --format json "$t"
  measure "as_${lim}_arena4" env MEMSCOPE_THREADS=16 MALLOC_ARENA_MAX=4 prlimit --as=$lim "$A" analyze --format json "$t"
done
rm -f "$t"
if [ -n "${SNAP_GIB:-}" ]; then
  s=$W/snap_big.pickle
  k=$(python3 -c "import os;print(max(1, round($SNAP_GIB*2**30/os.path.getsize('$D/snapshot.pickle'))))")
  measure gen_snap_big "$D/scale_snapshot" "$D/snapshot.pickle" "$s" "$k"
  ls -l "$s" >>"$OUT/log.txt"
  measure cat2_snap_big sh -c "cat '$s' >/dev/null; cat '$s' >/dev/null"
  measure after16_snap_big taskset -c 0-15 "$A" analyze --format json "$s"
  rm -f "$s"
fi
log done
