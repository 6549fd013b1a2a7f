#!/usr/bin/env bash
# Issue 43's large-input run (made for the 16+-core GPU machine, run through the device tool):
#
#   bench/big43/device.sh DIR OUT
#
# measure.sh must lie beside this script. DIR holds a release `memscope`, the release `scale_snapshot` example, a real snapshot
# (`snapshot.pickle`) and a real profiler trace (`trace.json`); OUT receives `results.tsv`
# (label, wall seconds, peak RSS in KiB, exit code, the end of stderr) and `log.txt`.
# It makes a series of snapshots from the real one (`scale_snapshot`: K copies in
# `_dump_snapshot`'s own layout, streamed) up to SNAP_GIB (default 20 GiB) and a trace of
# TRACE_GB (default 10 GB, `scale_trace_parallel.py` on every core), then times, for each:
# reading the file from the page cache (`cat`, twice: the second is the figure), memscope
# `analyze --format json` on 16 cores (`taskset -c 0-15`) and on all, and Python's
# `pickle.load` (snapshots up to PICKLE_GIB, default 1 GiB: it needs ~4x the file in RAM).
# SIZES (GiB, in order; default "$SMALL_GIB $SNAP_GIB trace $MID_GIB") picks the series; the word
# `trace` stands for the trace step. ALL_GIB (unset: SMALL_GIB and MID_GIB; empty: none) are also timed on
# every core. results.tsv's columns: label, wall s, peak RSS KiB, exit code, user s, sys s, stderr.
set -u
D=$(readlink -f "$1"); OUT=$(readlink -f "$2"); W=${W:-/tmp/big43}
BIN=$D/memscope
mkdir -p "$W" "$OUT"
SNAP_GIB=${SNAP_GIB:-20}; TRACE_GB=${TRACE_GB:-10}; PICKLE_GIB=${PICKLE_GIB:-1}
log() { echo "$(date -u +%T) $*" | tee -a "$OUT/log.txt"; }
. "$(dirname "$0")/measure.sh"  # measure LABEL CMD...
log "cores $(nproc); $(grep -m1 'model name' /proc/cpuinfo); $(free -g | awk '/Mem/{print $2" GiB RAM"}'); $(df -h "$W" | tail -1)"
"$BIN" --version >>"$OUT/log.txt" 2>&1 || log "memscope does not start here"
src_mib=$(python3 -c "import os;print(os.path.getsize('$D/snapshot.pickle')/2**20)")
# One copy of the capture takes about its own size in the output (K copies: K times).
# snap GIB ALL: one snapshot of GIB GiB, timed on 16 cores (and on all cores when ALL=1)
snap() {
  local gib=$1 all=$2 k f
  k=$(python3 -c "print(max(1, round($gib*1024/$src_mib)))")
  f=$W/snap_${gib}g.pickle
  log "generate $f (K=$k)"
  measure "gen_snapshot_${gib}g" "$D/scale_snapshot" "$D/snapshot.pickle" "$f" "$k"
  ls -l "$f" >>"$OUT/log.txt"
  measure "cat1_snap_${gib}g" sh -c "cat '$f' >/dev/null"
  measure "cat2_snap_${gib}g" sh -c "cat '$f' >/dev/null"
  measure "memscope16_snap_${gib}g" sh -c "exec taskset -c 0-15 '$BIN' analyze --format json '$f' >'$OUT/snap_${gib}g.json'"
  [ "$all" = 1 ] && measure "memscopeall_snap_${gib}g" "$BIN" analyze --format json "$f"
  # BEFORE_BIN: an older memscope timed on the same file (sizes up to PICKLE_GIB).
  if python3 -c "import sys; sys.exit(not ($gib <= $PICKLE_GIB))"; then
    [ -n "${BEFORE_BIN:-}" ] && measure "before16_snap_${gib}g" taskset -c 0-15 "$BEFORE_BIN" analyze --format json "$f"
    measure "pickle_load_snap_${gib}g" python3 -c "import pickle,sys;pickle.load(open(sys.argv[1],'rb'))" "$f"
    [ "${REPEAT:-1}" = 1 ] && measure "memscope16b_snap_${gib}g" taskset -c 0-15 "$BIN" analyze --format json "$f"
  fi
  rm -f "$f"
}
trace() {
  local k t
  k=$(python3 -c "print(max(1, round($TRACE_GB*1000/$src_mb)))")
  t=$W/trace_${TRACE_GB}gb.json
  log "generate $t (K=$k)"
  measure "gen_trace" python3 "$D/scale_trace_parallel.py" "$D/trace.json" "$t" "$k"
  ls -l "$t" >>"$OUT/log.txt"
  measure "cat1_trace" sh -c "cat '$t' >/dev/null"
  measure "cat2_trace" sh -c "cat '$t' >/dev/null"
  measure "memscope16_trace" sh -c "exec taskset -c 0-15 '$BIN' analyze --format json '$t' >'$OUT/trace.json'"
  measure "memscopeall_trace" "$BIN" analyze --format json "$t"
  rm -f "$t"
}
src_mb=$(python3 -c "import os;print(os.path.getsize('$D/trace.json')/1e6)")
# Most important first: the device call may be cut at its time limit.
SMALL_GIB=${SMALL_GIB:-1}; MID_GIB=${MID_GIB:-5}
ALL_GIB=${ALL_GIB-"$SMALL_GIB $MID_GIB"}
for s in ${SIZES:-"$SMALL_GIB $SNAP_GIB trace $MID_GIB"}; do
  if [ "$s" = trace ]; then trace; continue; fi
  all=0
  for a in $ALL_GIB; do [ "$a" = "$s" ] && all=1; done
  snap "$s" "$all"
done
log done
