"""Writes python/memscope/_sql.py: the queries of sql/*.sql as Python strings, so that the wheel
(which ships the `memscope` package, not this directory) runs them in `memscope.reduce`.

    python3 sql/embed.py

tests/python/test_summarize.py fails when the two differ.
"""

import os

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "python", "memscope", "_sql.py")


def render():
    lines = [
        '"""The shipped reduce queries (sql/*.sql), written by sql/embed.py: do not edit."""',
        "",
        "QUERIES = {",
    ]
    for name in sorted(os.listdir(HERE)):
        if name.endswith(".sql"):
            with open(os.path.join(HERE, name), encoding="utf-8") as f:
                lines.append(f"    {name[:-4]!r}: {f.read()!r},")
    lines.append("}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(render())
