"""ACCURACY.md's claims audit (issue 36): every sentence memscope says on the claims36 captures,
by kind, judged right or wrong against the truth each workload wrote before memscope read it.

The judge is fixtures/claims36/judge.py (its docstring gives each kind's rule and tolerance).
"Before" is fixtures/claims36/AUDIT_BEFORE.json: memscope f588332 on the 40 captures of
generate.py, frozen, since that binary is not rebuilt here. "After" is the binary given, on the
same 40 and on every capture (generate.py's 40 and spikes.py's 12).
"""

import importlib.util
import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLAIMS = os.path.join(ROOT, "fixtures", "claims36")


def _judge_module():
    spec = importlib.util.spec_from_file_location("claims36_judge", os.path.join(CLAIMS, "judge.py"))
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def _tally(allc, names):
    t = {}
    for n in names:
        for c in allc[n]["claims"]:
            r = t.setdefault(c["kind"], [0, 0])
            r[0] += 1
            r[1] += bool(c["right"])
    return t


def section(binary):
    j = _judge_module()
    with open(os.path.join(CLAIMS, "AUDIT_BEFORE.json")) as f:
        before = json.load(f)["captures"]
    _, names, allc, _ = j.judge(binary)
    old = [n for n in before if n in allc]
    tb, ta40, ta = _tally(before, list(before)), _tally(allc, old), _tally(allc, names)
    out = ["## Claims audit (fixtures/claims36)", "",
           f"Every sentence memscope says on the claims36 GPU captures ({len(names)}: generate.py's "
           f"{len(old)} and spikes.py's {len(names) - len(old)}), judged against the truth each workload "
           "wrote before memscope read it, by `fixtures/claims36/judge.py` (its docstring gives each "
           "kind's rule and tolerance). Before: memscope f588332 on generate.py's captures "
           "(AUDIT_BEFORE.json, frozen). A kind memscope did not say before has no before figure.", "",
           f"| kind of claim | before ({len(before)}) | after, same {len(old)} | after, all {len(names)} |",
           "|---|---|---|---|"]
    tot = [[0, 0], [0, 0], [0, 0]]
    for k in j.KINDS:
        row = []
        for i, t in enumerate((tb, ta40, ta)):
            c, r = t.get(k, [0, 0])
            tot[i][0] += c
            tot[i][1] += r
            row.append(f"{r}/{c}" if c else "-")
        out.append(f"| {k} | " + " | ".join(row) + " |")
    out.append("| **all** | " + " | ".join(f"**{r}/{c}**" for c, r in tot) + " |")
    wrong = [(n, c) for n in names for c in allc[n]["claims"] if not c["right"]]
    out += ["", "The reserved-gap row was judged at 256 MiB above the allocated peak before and at the "
            "512 MiB that memscope documents (src/analysis/reserved.rs) after: the two captures between "
            "(430 and 458 MiB above) are not findings by design. A hand-written optimizer (a plain class, "
            "not a torch.optim.Optimizer) keeps its state under no optimizer frame: memscope counts it "
            "as other memory. LBFGS is judged at memscope's peak against the truth at the dump (memscope's "
            "figure at the dump is exact)."]
    out += ["", f"Claims still wrong after ({len(wrong)}):"]
    out += [f"- `{n}` {c['kind']}: {c['said']} (truth: {c['truth']})".replace("\n", " ") for n, c in wrong]
    if not wrong:
        out.append("- none")
    return "\n".join(out)
