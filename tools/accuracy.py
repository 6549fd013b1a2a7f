#!/usr/bin/env python3
"""How often memscope's leak, line, OOM-cause and step conclusions match the captures' known truth.

Usage, from the repository root (build the binary once with `cargo build --release --locked`):

    python3 tools/accuracy.py target/release/memscope [-o ACCURACY.md] [--json FILE]

For every capture with a written-down truth it runs `MEMSCOPE analyze --format json FILE` and
tabulates the truth against memscope's conclusions, then the totals. The truth comes from:

- `fixtures/realistic/*.meta.json`: written by fixtures/realistic/generate.py before memscope was ever
  run (`leak`, `expect_line` + `expect_line_kind`, `expect_oom_cause`, `steps`);
- `fixtures/loops/*.meta.json`: the same fields, written by the scenario scripts of fixtures/loops/run
  (fixtures/loops/generate.py) before memscope analysed anything, plus `accumulation`: `alive`,
  `released_after_loop`, `released_each_epoch`, `retained_attempt` or null;
- `fixtures/*.meta.json`: the project's first captures; their `expect` text and `markers` are turned
  into the same fields in EXISTING below, each entry saying which sentence of fixtures/README.md it
  rests on;
- the three snapshots of `../shared/fixtures`, per that folder's README (SHARED below), when present.

Scoring:
- memscope "finds a leak" when `leaks[]` is not empty, or its verdict is `leak`, `oom_leak` or
  `graph_growth`. A finding on a clean capture is a false positive; a leaky capture without one is a
  false negative. Captures whose truth is "not scorable" (the leak is real but a capture of this kind
  cannot show it) are listed but not counted.
- A line is right when some finding names the expected file and line: for a "keeping" truth its
  `blame` or `cause_site`, or its `site` when it gives no `cause_site` (the site then is the keeping
  line); for an "allocating" truth its `site` or `blame`.
- The OOM cause is right when memscope's last OOM's `cause` equals the truth (no OOM on both sides
  counts as right).
- The accumulation is right (fixtures/loops, where the truth names one) when some finding in `leaks[]`
  has `extent` equal to the truth (`alive`, `released_after_loop`, `released_each_epoch`), or, for a
  `retained_attempt` truth, `kind` (or `extent`) `retained_attempt`. A capture with no finding at all
  is wrong; findings that carry no `extent` (and, for `retained_attempt`, no such kind) are "-".
- The verdict is right when `verdict.kind` is the one the truth implies: `oom_CAUSE` for an OOM
  (`oom_retained_attempt` or `oom_leak` for an OOM caused by retained attempts),
  `unjudged` for a single pass (one iteration: no leak judgement is possible), `leak` (or
  `graph_growth` for a trace) for a leak, `ok` otherwise.
- The step count is right when the number of `steps[]` that are iterations (not `setup`/`tail`),
  or 1 where memscope calls the log one pass through the program (`structure.single_pass`)
  or one call of a decoding loop (`structure.decoding_loops`: tokens, not steps), equals the
  truth's count. Truth without a count is not scored.

Fields the JSON does not have yet (`blame`, an `unjudged` verdict) are read when present and shown as
"-" when absent. The script exits non-zero only when it crashes; a capture memscope fails on is a row
with the error, counted as "no finding".
"""

import argparse
import glob
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LEAK_VERDICTS = {"leak", "oom_leak", "graph_growth", "oom_retained_attempt"}
ACCUMULATIONS = {"alive", "released_after_loop", "released_each_epoch", "retained_attempt"}
NOT_SCORABLE = "not scorable"

# The project's first captures (fixtures/*.meta.json), read from their meta.json `expect` and
# `markers` and fixtures/README.md. leak: True / False / NOT_SCORABLE. line: (kind, line) in
# fixtures/generate.py, or None. steps: the real loop iterations recorded (None: not one level,
# or not known from the capture's window). Lines are checked against the markers at run time.
EXISTING = {
    # "An OOM caused by a leak ... allocated by the forward at line 150 and kept alive ... by
    # losses.append(loss)": the append allocates nothing, so the allocating line. 23 steps done, the
    # 24th begun and stopped by the OOM (steps count iterations begun, as in fixtures/realistic).
    "leak_oom": dict(leak=True, line=("allocating", 150), oom="leak", steps=24, level="step"),
    "fragmentation_oom": dict(leak=False, line=None, oom="fragmentation", steps=None, level=None),
    "expandable_frag_oom": dict(leak=False, line=None, oom="fragmentation", steps=None, level=None),
    "huge_request_oom": dict(leak=False, line=None, oom="capacity", steps=4, level="step"),
    "clean": dict(leak=False, line=None, oom=None, steps=12, level="step"),
    # The ring kept only the last of 40 steps: how many is not stated, so not scored.
    "ring_overflow": dict(leak=False, line=None, oom=None, steps=None, level="step"),
    "expandable": dict(leak=False, line=None, oom=None, steps=12, level="step"),
    "two_streams": dict(leak=False, line=None, oom=None, steps=10, level="step"),
    # "A snapshot cannot show this leak, and an analysis must not invent GPU growth".
    "leak_total_loss": dict(leak=NOT_SCORABLE, line=None, oom=None, steps=12, level="step"),
    "leak_history": dict(leak=True, line=("allocating", 365), oom=None, steps=12, level="step"),
    "leak_preds": dict(leak=True, line=("allocating", 384), oom=None, steps=12, level="step"),
    # "allocated and kept by line 414": 8 training steps, then 12 validation batches (two levels).
    "leak_val_no_grad": dict(leak=True, line=("keeping", 414), oom=None, steps=None, level=None),
    # "The line that keeps it, 431, is in the hook and never appears in an allocation stack".
    "leak_hook": dict(leak=True, line=("allocating", 437), oom=None, steps=12, level="step"),
    "leak_cache_dict": dict(leak=True, line=("keeping", 463), oom=None, steps=12, level="step"),
    # What-if captures: wi_frag default OOMs at the 600 MiB request, expandable maps it; wi_leak OOMs
    # after 201 steps under both (the 202nd begun), its LEAK line allocating the kept tensor itself.
    "wi_frag_default": dict(leak=False, line=None, oom="fragmentation", steps=None, level=None),
    "wi_frag_expandable": dict(leak=False, line=None, oom=None, steps=None, level=None),
    "wi_leak_default": dict(leak=True, line=("keeping", 255), oom="leak", steps=202, level="step"),
    "wi_leak_expandable": dict(leak=True, line=("keeping", 255), oom="leak", steps=202, level="step"),
    "wi_spikes_default": dict(leak=False, line=None, oom=None, steps=None, level=None),
    "wi_spikes_expandable": dict(leak=False, line=None, oom=None, steps=None, level=None),
    "wi_spikes_gc05": dict(leak=False, line=None, oom=None, steps=None, level=None),
    "wi_spikes_msplit200": dict(leak=False, line=None, oom=None, steps=None, level=None),
    "wi_mixed_default": dict(leak=False, line=None, oom=None, steps=None, level=None),
    "wi_mixed_expandable": dict(leak=False, line=None, oom=None, steps=None, level=None),
    "wi_mixed_gc05": dict(leak=False, line=None, oom=None, steps=None, level=None),
    "wi_mixed_msplit64": dict(leak=False, line=None, oom=None, steps=None, level=None),
    "wi_mixed_rp2d4": dict(leak=False, line=None, oom=None, steps=None, level=None),
    # Traces: 10 profiled steps each (ProfilerStep#2..#11).
    "trace_total_loss": dict(leak=NOT_SCORABLE, line=None, oom=None, steps=10, level="step"),
    "trace_val_no_grad": dict(leak=True, line=("keeping", 537), oom=None, steps=10, level="step"),
    # "The hook shows up as ... its def line, while the leak line is 552": the allocating line.
    "trace_hook_cache": dict(leak=True, line=("allocating", 558), oom=None, steps=10, level="step"),
    "trace_clean": dict(leak=False, line=None, oom=None, steps=10, level="step"),
}

# ../shared/fixtures, per its README: frames say `scenarios.py`.
SHARED = {
    # "every batch's autograd graph ... is kept alive by the accumulated loss tensor at line 61"; the
    # line allocates the accumulator, so it is in the capture. 5 training steps + 92 batches.
    "val_no_grad_oom.pickle": dict(leak=True, line=("keeping", 61), oom="leak", steps=None, level=None,
                                   description="MLP; validation without no_grad, val_loss += crit(out, y), OOM after 92 batches"),
    "fragmentation_oom.pickle": dict(leak=False, line=None, oom="fragmentation", steps=None, level=None,
                                     description="6 MiB tensors in threes, the middle kept, then 512 MiB"),
    "clean_training.pickle": dict(leak=False, line=None, oom=None, steps=None, level=None,
                                  description="the same kind of loop done right"),
}


def capture_file(meta_path):
    base = meta_path[: -len(".meta.json")]
    for ext in (".pickle.gz", ".pickle", ".trace.json.gz", ".trace.json"):
        if os.path.exists(base + ext):
            return base + ext
    return None


def realistic_cases(folder="realistic"):
    """fixtures/FOLDER/*.meta.json (realistic, loops): the truth their generators wrote."""
    out = []
    for mp in sorted(glob.glob(os.path.join(ROOT, "fixtures", folder, "*.meta.json"))):
        if mp.endswith(".smoke.meta.json"):
            continue
        with open(mp) as f:
            m = json.load(f)
        line = m.get("expect_line")
        out.append(dict(
            group=folder, name=m["name"], file=capture_file(mp), leak=m["leak"],
            accumulation=m.get("accumulation"), capture_mode=m.get("capture_mode"),
            line=(m["expect_line_kind"], line["line"]) if line else None,
            line_file=line["file"] if line else None, code=line["code"] if line else None,
            oom=m.get("expect_oom_cause"), steps=(m.get("steps") or {}).get("count"),
            level=(m.get("steps") or {}).get("level"), description=m.get("description", "")))
    return out


def existing_cases():
    out = []
    for name, t in EXISTING.items():
        mp = os.path.join(ROOT, "fixtures", name + ".meta.json")
        if not os.path.exists(mp):
            continue
        with open(mp) as f:
            m = json.load(f)
        code = None
        if t["line"]:
            hits = [k for k in m.get("markers", []) if k["line"] == t["line"][1]]
            if not hits:
                raise SystemExit(f"accuracy.py: {name}: line {t['line'][1]} is not among its markers")
            code = hits[0]["code"]
        out.append(dict(group="fixtures", name=name, file=capture_file(mp), leak=t["leak"], line=t["line"],
                        line_file=m.get("script_filename_in_frames", "fixtures/generate.py"), code=code,
                        oom=t["oom"], steps=t["steps"], level=t["level"], description=m.get("description", "")))
    return out


def shared_cases():
    out = []
    d = os.path.join(ROOT, "..", "shared", "fixtures")
    for fname, t in SHARED.items():
        p = os.path.join(d, fname)
        if os.path.exists(p):
            out.append(dict(group="shared", name=fname.split(".")[0], file=p, line_file="scenarios.py",
                            code=None, **t))
    return out


def run_memscope(binary, path):
    t = time.time()
    try:
        p = subprocess.run([binary, "analyze", "--format", "json", path], capture_output=True, timeout=600)
    except subprocess.TimeoutExpired:
        return None, "timeout", time.time() - t
    try:
        env = json.loads(p.stdout)
    except ValueError as e:
        if p.returncode != 0:
            return None, f"exit {p.returncode}: {p.stderr.decode(errors='replace').strip()[:200]}", time.time() - t
        return None, f"bad JSON: {e}", time.time() - t
    # The memscope/1 envelope (docs/json.md): the report is its data; a failure has errors.
    if env.get("envelope") != "memscope/1":
        return None, f"not a memscope/1 envelope: {str(env.get('envelope'))[:40]}", time.time() - t
    if env.get("errors") or env.get("data") is None:
        errs = "; ".join(f"{e.get('kind')}: {e.get('message')}" for e in env.get("errors") or [])
        return None, f"exit {p.returncode}: {errs[:200]}", time.time() - t
    return env["data"], None, time.time() - t


def site_of(x):
    if isinstance(x, dict) and "line" in x:
        return (x.get("file") or "", x.get("line"))
    return None


def same_line(site, file, line):
    return site is not None and site[1] == line and (site[0] == file or site[0].endswith("/" + file)
                                                     or file.endswith("/" + site[0]))


def judge(case, rep, err):
    """memscope's conclusions about one capture, and whether each matches the truth."""
    r = dict(error=err)
    if rep is None:
        r.update(verdict="error", findings=[], found=False, oom=None, steps=None)
    else:
        leaks = rep.get("leaks") or []
        r["verdict"] = (rep.get("verdict") or {}).get("kind", "-")
        r["findings"] = [dict(kind=lk.get("kind", "-"), site=site_of(lk.get("site")),
                              cause=site_of(lk.get("cause_site")), blame=site_of(lk.get("blame")),
                              confidence=lk.get("confidence", "-"), extent=lk.get("extent"))
                         for lk in leaks]
        r["found"] = bool(leaks) or r["verdict"] in LEAK_VERDICTS
        ooms = [o for d in rep.get("devices") or [] for o in d.get("ooms") or []]
        r["oom"] = ooms[-1].get("cause") if ooms else None
        steps = rep.get("steps")
        r["steps"] = (sum(1 for s in steps if s.get("source") not in ("setup", "tail"))
                      if isinstance(steps, list) else None)
        # A log memscope calls one pass through the program (structure.single_pass on every
        # device with history), or one call whose loop is a decoding loop's tokens, is one
        # step: the pass itself.
        structures = [d.get("structure") or {} for d in rep.get("devices") or []]
        if r["steps"] == 0 and structures and all(
                s.get("single_pass") or s.get("decoding_loops") for s in structures):
            r["steps"] = 1
    # Scores: True / False / None (not scored).
    r["leak_ok"] = None if case["leak"] == NOT_SCORABLE else (r["found"] == case["leak"])
    if case["leak"] is True and case["line"]:
        kind, line = case["line"]
        ok = False
        for fd in r["findings"]:
            cands = [fd["blame"]]
            if kind == "keeping":
                cands += [fd["cause"]] if fd["cause"] else [fd["site"]]
            else:
                cands += [fd["site"]]
            ok = ok or any(same_line(c, case["line_file"], line) for c in cands)
        r["line_ok"] = ok
    else:
        r["line_ok"] = None
    r["oom_ok"] = (r["oom"] == case["oom"]) if (case["oom"] or r["oom"]) else None
    r["accumulation"], r["accumulation_ok"] = judge_accumulation(case.get("accumulation"), r["findings"])
    want = expected_verdicts(case)
    r["verdict_ok"] = None if want is None else (r["verdict"] in want)
    r["steps_ok"] = (r["steps"] == case["steps"]) if case["steps"] is not None else None
    return r


def judge_accumulation(truth, findings):
    """(what memscope says, right?) about the accumulation: the findings' extents (or the
    retained_attempt kind); right when one equals the truth; None (not scored, "-") when the truth
    names none or the findings carry no extent."""
    said = sorted({f["extent"] for f in findings if f.get("extent")} |
                  {"retained_attempt" for f in findings if f.get("kind") == "retained_attempt"})
    shown = ", ".join(said) if said else ("none" if not findings else "-")
    if truth not in ACCUMULATIONS:
        return shown, None
    if not findings:
        return shown, False
    if not said:
        return shown, None
    return shown, truth in said


def expected_verdicts(case):
    """The verdict kinds the truth allows (None: not scored)."""
    if case["oom"] == "retained_attempt":
        return {"oom_retained_attempt", "oom_leak"}
    if case["oom"]:
        return {"oom_" + case["oom"]}
    if case["level"] == "single pass":
        return {"unjudged"}
    if case["leak"] is True:
        return {"leak", "graph_growth"} if (case["file"] or "").endswith((".json", ".json.gz")) else {"leak"}
    if case["leak"] is False:
        return {"ok"}
    return None


def fmt_site(s):
    return "-" if s is None else f"{os.path.basename(s[0])}:{s[1]}"


def fmt_findings(fs):
    if not fs:
        return "none"
    parts = []
    for f in fs[:4]:
        p = f"{f['kind']} @{fmt_site(f['site'])}"
        if f.get("extent"):
            p += f" [{f['extent']}]"
        if f["cause"]:
            p += f" kept@{fmt_site(f['cause'])}"
        if f["blame"]:
            p += f" blame@{fmt_site(f['blame'])}"
        parts.append(p)
    if len(fs) > 4:
        parts.append(f"+{len(fs) - 4} more")
    return "; ".join(parts)


def mark(v):
    return {True: "yes", False: "**no**", None: "-"}[v]


def ratio(num, den):
    return f"{num}/{den} ({100 * num / den:.0f}%)" if den else "-"


def render(cases, results, binary):
    lines = ["# memscope accuracy on labelled captures", "",
             "Made by `python3 tools/accuracy.py " + os.path.relpath(binary, ROOT) + "`, which runs "
             "`memscope analyze --format json` on every capture whose truth was written down before memscope "
             "saw it, and compares. Do not edit by hand: regenerate. How each column is scored is in the "
             "script's header; the truth comes from `fixtures/realistic/*.meta.json` (see "
             "fixtures/realistic/README.md), from `fixtures/loops/*.meta.json` (see fixtures/loops/README.md), "
             "from `fixtures/*.meta.json` and fixtures/README.md (the table "
             "EXISTING in the script), and from `../shared/fixtures/README.md`.", ""]
    tp = sum(1 for c, r in zip(cases, results) if c["leak"] is True and r["found"])
    fp = sum(1 for c, r in zip(cases, results) if c["leak"] is False and r["found"])
    fn = sum(1 for c, r in zip(cases, results) if c["leak"] is True and not r["found"])
    tn = sum(1 for c, r in zip(cases, results) if c["leak"] is False and not r["found"])

    def score(key, group=None):
        rs = [r[key] for c, r in zip(cases, results) if r[key] is not None and (group is None or c["group"] == group)]
        return ratio(sum(rs), len(rs))

    lines += ["## Totals", "",
              "| measure | all | realistic | loops | fixtures | shared |", "|---|---|---|---|---|---|"]
    for label, key in [("leak judgement right (found = truth)", "leak_ok"), ("leak line right", "line_ok"),
                       ("verdict right", "verdict_ok"),
                       ("OOM cause right", "oom_ok"), ("step count right", "steps_ok"),
                       ("accumulation right", "accumulation_ok")]:
        lines.append(f"| {label} | {score(key)} | {score(key, 'realistic')} | {score(key, 'loops')} | "
                     f"{score(key, 'fixtures')} | {score(key, 'shared')} |")
    prec = ratio(tp, tp + fp)
    rec = ratio(tp, tp + fn)
    lines += ["", f"Leak findings over all scored captures: {tp} true positives, {fp} false positives, "
              f"{fn} false negatives, {tn} true negatives. **Precision {prec}, recall {rec}.**",
              f"{len(cases)} captures, {sum(1 for r in results if r['error'])} that memscope could not analyse.", ""]
    for group, title in [("realistic", "Realistic captures (fixtures/realistic)"),
                         ("loops", "Loops as users capture them (fixtures/loops)"),
                         ("fixtures", "The project's first captures (fixtures/)"),
                         ("shared", "Shared captures (../shared/fixtures)")]:
        rows = [(c, r) for c, r in zip(cases, results) if c["group"] == group]
        if not rows:
            continue
        loops = group == "loops"
        lines += [f"## {title}", "",
                  "| capture | truth: leak | expected line (kind) | truth: OOM | truth: steps "
                  + ("| truth: accumulation " if loops else "") + "| memscope verdict "
                  "| memscope findings (kind @site, kept@cause_site, blame@) | memscope OOM | memscope steps "
                  + ("| memscope extent " if loops else "")
                  + "| leak | line | verdict | OOM | steps |" + (" accumulation |" if loops else ""),
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|" + ("---|---|---|" if loops else "")]
        for c, r in rows:
            leak = {True: "leak", False: "clean"}.get(c["leak"], NOT_SCORABLE)
            line = "-" if not c["line"] else f"{c['line'][1]} ({c['line'][0]})"
            if c["line"] and loops:
                line = f"{os.path.basename(c['line_file'])}:{c['line'][1]} ({c['line'][0]})"
            steps = "-" if c["steps"] is None else f"{c['steps']} ({c['level']})"
            verdict = r["verdict"] if not r["error"] else f"error: {r['error']}"
            acc_truth = f"{c.get('accumulation') or '-'} | " if loops else ""
            acc_said = f"{r.get('accumulation') or '-'} | " if loops else ""
            acc_ok = f" {mark(r.get('accumulation_ok'))} |" if loops else ""
            lines.append(f"| `{c['name']}` | {leak} | {line} | {c['oom'] or '-'} | {steps} | {acc_truth}{verdict} | "
                         f"{fmt_findings(r['findings'])} | {r['oom'] or '-'} | "
                         f"{'-' if r['steps'] is None else r['steps']} | {acc_said}{mark(r['leak_ok'])} | "
                         f"{mark(r['line_ok'])} | {mark(r['verdict_ok'])} | {mark(r['oom_ok'])} | "
                         f"{mark(r['steps_ok'])} |{acc_ok}")
        lines.append("")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("memscope", help="path to the memscope binary (target/release/memscope)")
    ap.add_argument("-o", "--output", default=os.path.join(ROOT, "ACCURACY.md"))
    ap.add_argument("--json", help="also write the rows as JSON here")
    args = ap.parse_args()
    binary = os.path.abspath(args.memscope)
    cases = realistic_cases() + realistic_cases("loops") + existing_cases() + shared_cases()
    results = []
    t0 = time.time()
    for c in cases:
        if c["file"] is None:
            rep, err = None, "capture file missing"
        else:
            rep, err, _ = run_memscope(binary, c["file"])
        results.append(judge(c, rep, err))
        r = results[-1]
        print(f"{c['group']:9s} {c['name']:22s} verdict={r['verdict']:18s} found={r['found']!s:5s} "
              f"leak_ok={r['leak_ok']} line_ok={r['line_ok']} verdict_ok={r['verdict_ok']} oom_ok={r['oom_ok']} "
              f"steps_ok={r['steps_ok']} accumulation_ok={r['accumulation_ok']}",
              flush=True)
    md = render(cases, results, binary)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import plan_accuracy
    md += "\n\n" + plan_accuracy.section(binary)
    import claims_audit
    md += "\n\n" + claims_audit.section(binary)
    with open(args.output, "w") as f:
        f.write(md + "\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump([dict(case={k: v for k, v in c.items() if k != "file"}, result=r)
                       for c, r in zip(cases, results)], f, indent=1, default=str)
    print(f"wrote {os.path.relpath(args.output)} ({time.time() - t0:.1f} s of analysis)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
