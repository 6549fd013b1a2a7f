#!/usr/bin/env bash
# Issue 43, session 16 (s16h43r): the replay split across threads, on the GPU host (through the
# device tool, from /work/main with carry [".dev/s16h43r"]; the kit is gzipped, stripped binaries):
#
#   bash .dev/s16h43r/replay_s16.sh              (OUT set by the tool; the first call)
#   VARIANT=b bash .dev/s16h43r/replay_s16.sh    (the second call)
#
# The x383 1 GiB snapshot of snapshot.pickle, `cat`, then:
# - first call: after and before on 16 cores alternating (3 each), after with the split turned off
#   (MEMSCOPE_REPLAY_SPLIT_MIN past the log), after and before on 1 thread, the outputs' md5, and the
#   probe's phases on 1 and 16 threads;
# - VARIANT=b (the split after the pre-fault and in-place series): the probe's phases on 16 threads
#   first (it prints the split's phases, TT lines), then after, before and after without the split,
#   alternating (2 each), and the md5.
set -u
D=$(readlink -f "$(dirname "$0")"); W=/tmp/s16h43r; mkdir -p "$W" "$OUT"
. bench/big43/measure.sh
for f in memscope memscope_before probe scale_snapshot; do gunzip -c "$D/$f.gz" >"$W/$f"; chmod +x "$W/$f"; done
A=$W/memscope; B=$W/memscope_before
log() { echo "$(date -u +%T) $*" | tee -a "$OUT/log.txt"; }
probe() { log "probe MEMSCOPE_THREADS=$1"; MEMSCOPE_THREADS=$1 taskset -c 0-15 "$W/probe" "$s" 2>&1 | tee -a "$OUT/log.txt"; }
nosplit() { measure after16_nosplit_snap_1g env MEMSCOPE_REPLAY_SPLIT_MIN=99999999999 taskset -c 0-15 "$A" analyze --format json "$s"; }
[ "${VARIANT:-a}" = b ] || log "cores $(nproc); $(grep -m1 'model name' /proc/cpuinfo); $("$A" --version)"
s=$W/snap_1g.pickle
measure gen_snap_1g "$W/scale_snapshot" "$D/snapshot.pickle" "$s" 383
cat "$s" >/dev/null; measure cat_snap_1g sh -c "cat '$s' >/dev/null"
if [ "${VARIANT:-a}" = b ]; then
  probe 16
  for i in 1 2; do
    measure after16_snap_1g taskset -c 0-15 "$A" analyze --format json "$s"
    measure before16_snap_1g taskset -c 0-15 "$B" analyze --format json "$s"
    nosplit
  done
else
  for i in 1 2 3; do
    measure after16_snap_1g taskset -c 0-15 "$A" analyze --format json "$s"
    measure before16_snap_1g taskset -c 0-15 "$B" analyze --format json "$s"
  done
  nosplit
  measure after1_snap_1g env MEMSCOPE_THREADS=1 "$A" analyze --format json "$s"
  measure before1_snap_1g env MEMSCOPE_THREADS=1 "$B" analyze --format json "$s"
fi
log "md5 after $("$A" analyze --format json "$s" | md5sum) before $("$B" analyze --format json "$s" | md5sum)"
[ "${VARIANT:-a}" = b ] || { probe 1; probe 16; }
rm -f "$s"
