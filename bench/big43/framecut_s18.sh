#!/usr/bin/env bash
# Issue 43, session 18 (s18h43f): the frame-cut planner of a parallel snapshot decode, on the GPU host
# (through the device tool, from the checkout with carry [".dev/s18h43f"]; the kit holds gzipped,
# stripped binaries built on this branch: memscope, framecut and scale_snapshot (examples), and the
# snapshot to scale, snapshot.pickle, as for replay_s16.sh):
#
#   bash .dev/s18h43f/framecut_s18.sh        (OUT set by the tool)
#
# Makes the x383 snapshot (about 1.1 GB, now framed like a real `_dump_snapshot` file) and an x40 one,
# then: `cat`; the planner (frame chain, hand-off, per-piece MEMOIZE walk) with 64 pieces on 1, 4, 8
# and 16 threads (3 runs each; its lines go to log.txt); the planner's memo bases checked against the
# decoder's on the x40 file (a generic serial decode: too much memory for the 1.1 GB one); `analyze`
# on 1 and 16 threads for the decode it would split (results.tsv, one row per command).
set -u
D=$(readlink -f "$(dirname "$0")"); W=/tmp/s18h43f; mkdir -p "$W" "$OUT"
. bench/big43/measure.sh
for f in memscope framecut scale_snapshot; do gunzip -c "$D/$f.gz" >"$W/$f"; chmod +x "$W/$f"; done
A=$W/memscope
log() { echo "$(date -u +%T) $*" | tee -a "$OUT/log.txt"; }
log "cores $(nproc); $(grep -m1 'model name' /proc/cpuinfo); $("$A" --version)"
s=$W/snap_1g.pickle; s40=$W/snap_40.pickle
measure gen_snap_1g "$W/scale_snapshot" "$D/snapshot.pickle" "$s" 383
measure gen_snap_40 "$W/scale_snapshot" "$D/snapshot.pickle" "$s40" 40
cat "$s" >/dev/null; measure cat_snap_1g sh -c "cat '$s' >/dev/null"
for t in 1 4 8 16; do
  for i in 1 2 3; do
    log "framecut 64 pieces, $t threads"
    taskset -c 0-15 "$W/framecut" "$s" 64 "$t" 2>&1 | tee -a "$OUT/log.txt"
    measure "framecut${t}_snap_1g" taskset -c 0-15 "$W/framecut" "$s" 64 "$t"
  done
done
log "framecut --check on x40"; "$W/framecut" "$s40" 64 16 --check 2>&1 | tee -a "$OUT/log.txt"
measure after16_snap_1g taskset -c 0-15 "$A" analyze --format json "$s"
measure after1_snap_1g env MEMSCOPE_THREADS=1 "$A" analyze --format json "$s"
rm -f "$s" "$s40"
