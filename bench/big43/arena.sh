#!/usr/bin/env bash
# Issue 43: glibc malloc arenas against time and address space (run on the GPU host: bench/big43/arena.sh DIR OUT;
# DIR as for pair.sh, with memscope.gz and scale_snapshot.gz); results: bench/big43/results/s14_lead_arena_h200.tsv (made
# before measure.sh was shared: its stderr column is Python's repr)
set -u
D=$(readlink -f "$1"); OUT=$(readlink -f "$2"); W=/tmp/ar; mkdir -p $W "$OUT"
. "$(dirname "$0")/measure.sh"  # measure LABEL CMD... (rows to $OUT/results.tsv)
cd $D && gunzip -kf memscope.gz scale_snapshot.gz && chmod +x memscope scale_snapshot
A=$D/memscope
xz -dc big_allstacks.pickle.xz > $W/ba.pickle; cat $W/ba.pickle >/dev/null
for c in 0-1 0-15; do for i in 1 2 3; do measure "main_${c}_allstacks" taskset -c $c $A analyze --format json $W/ba.pickle; done
measure "pickle_${c}_allstacks" taskset -c $c python3 -c "import pickle,sys;pickle.load(open(sys.argv[1],'rb'))" $W/ba.pickle; done
t=$W/t90.json; PYTHONPATH=$D python3 scale_trace_parallel.py trace.json $t 23 >/dev/null
for lim in 500000000 700000000 1000000000 1500000000; do for a in default 8 4 2; do
  e=""; [ $a != default ] && e="MALLOC_ARENA_MAX=$a"
  measure "as_${lim}_arena_$a" env MEMSCOPE_THREADS=16 $e prlimit --as=$lim $A analyze --format json $t; done; done
t=$W/t10.json; measure gen_trace env PYTHONPATH=$D python3 scale_trace_parallel.py trace.json $t 2324
measure cat1 sh -c "cat $t >/dev/null"; measure cat2 sh -c "cat $t >/dev/null"
for i in 1 2; do for a in default 8 4 2; do
  e="X=1"; [ $a != default ] && e="MALLOC_ARENA_MAX=$a"
  measure "trace10_arena_$a" env $e taskset -c 0-15 $A analyze --format json $t; done; done
