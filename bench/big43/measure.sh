# Sourced by issue 43's device scripts (device.sh, device_threads.sh, pair.sh): needs OUT set.
# measure LABEL CMD...: runs CMD (stdout discarded) and appends one row to $OUT/results.tsv:
# label, wall seconds, the child's peak RSS in KiB, exit code, user s, sys s, the end of stderr.
measure() {
  python3 - "$@" <<'PY' | tee -a "$OUT/results.tsv"
import resource, subprocess, sys, time
label, cmd = sys.argv[1], sys.argv[2:]
before = resource.getrusage(resource.RUSAGE_CHILDREN)
t = time.perf_counter()
r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
w = time.perf_counter() - t
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
err = r.stderr.decode(errors="replace").strip().replace("\n", " | ")[-300:]
print(f"{label}\t{w:.3f}\t{ru.ru_maxrss}\t{r.returncode}\t{ru.ru_utime-before.ru_utime:.2f}\t{ru.ru_stime-before.ru_stime:.2f}\t{err}", flush=True)
PY
}
