"""The README's table of rules, generated from the rule registry (each rule's own metadata).

    .venv/bin/python scripts/rules_table.py           # print the table
    .venv/bin/python scripts/rules_table.py --write   # rewrite the table in README.md

One row per rule, in code order: the code linked to its page in rules/, its name, whether it is on by
default, and its summary (what ``tfpar-lint --list-rules`` prints). tests/test_rule_pages.py checks that
README.md holds exactly this table, so a new rule, a renamed one or a changed default fails there until
the table is written again.
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
START = "<!-- rules-table:start -->"
END = "<!-- rules-table:end -->"


def table() -> str:
    sys.path.insert(0, str(ROOT / "src"))
    from tfpar_lint.registry import all_rules

    rows = ["| code | name | default | what |", "|---|---|---|---|"]
    for r in sorted(all_rules(), key=lambda r: r.CODE):
        rows.append(f"| [{r.CODE}](rules/{r.CODE}.md) | {r.NAME} | {'on' if r.DEFAULT_ENABLED else 'off'} | "
                    f"{r.SUMMARY.replace('|', chr(92) + '|')} |")
    return f"{START}\n" + "\n".join(rows) + f"\n{END}"


def block_now(text: str) -> str | None:
    i, j = text.find(START), text.find(END)
    return None if i < 0 or j < i else text[i:j + len(END)]


def main(argv: list[str]) -> int:
    new = table()
    if "--write" not in argv:
        print(new)
        return 0
    text = README.read_text(encoding="utf-8")
    old = block_now(text)
    if old is None:
        raise SystemExit(f"README.md has no {START} ... {END} markers")
    README.write_text(text.replace(old, new), encoding="utf-8")
    print(f"wrote the rules table of {README.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
