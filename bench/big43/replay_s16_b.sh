#!/usr/bin/env bash
# s16h43r, second call: the split after the pre-fault and in-place series; the probe prints the split's phases (TT lines).
set -u
D=$(readlink -f "$(dirname "$0")"); W=/tmp/s16h43r; mkdir -p "$W" "$OUT"
. bench/big43/measure.sh
for f in memscope memscope_before probe scale_snapshot; do gunzip -c "$D/$f.gz" >"$W/$f"; chmod +x "$W/$f"; done
A=$W/memscope; B=$W/memscope_before
log() { echo "$(date -u +%T) $*" | tee -a "$OUT/log.txt"; }
s=$W/snap_1g.pickle
measure gen_snap_1g "$W/scale_snapshot" "$D/snapshot.pickle" "$s" 383
cat "$s" >/dev/null; measure cat_snap_1g sh -c "cat '$s' >/dev/null"
log "probe MEMSCOPE_THREADS=16"; MEMSCOPE_THREADS=16 taskset -c 0-15 "$W/probe" "$s" 2>&1 | tee -a "$OUT/log.txt"
for i in 1 2; do
  measure after16_snap_1g taskset -c 0-15 "$A" analyze --format json "$s"
  measure before16_snap_1g taskset -c 0-15 "$B" analyze --format json "$s"
  measure after16_nosplit_snap_1g env MEMSCOPE_REPLAY_SPLIT_MIN=99999999999 taskset -c 0-15 "$A" analyze --format json "$s"
done
log "md5 after $("$A" analyze --format json "$s" | md5sum) before $("$B" analyze --format json "$s" | md5sum)"
rm -f "$s"
