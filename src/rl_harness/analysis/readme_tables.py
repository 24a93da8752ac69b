"""Tables a study's README holds, written by a command from its committed records.

A README marks each generated table with `<!-- report:NAME -->` ... `<!-- /report:NAME -->`;
`render_blocks(text, {NAME: table})` puts each table between its markers, and
`readme_main(readme, make_tables)` is a study's `python -m ... --write | --check` command
(`--check` exits 1 when the README differs from the records: a fast test runs it).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path


def _block_pattern(name: str) -> re.Pattern[str]:
    return re.compile(rf"(<!-- report:{name} -->\n)(.*?)(<!-- /report:{name} -->)", re.DOTALL)


def _body_replacer(table: str) -> Callable[[re.Match[str]], str]:
    """A block's opening and closing lines kept, its body replaced by `table`."""
    return lambda m: m.group(1) + table + "\n" + m.group(3)


def render_blocks(text: str, tables: Mapping[str, str]) -> str:
    """`text` with each block's body replaced by its table; a table whose block the text
    lacks is an error (KeyError naming it): the README names every generated table."""
    for name, table in tables.items():
        pattern = _block_pattern(name)
        if not pattern.search(text):
            raise KeyError(f"the README has no <!-- report:{name} --> block")
        text = pattern.sub(_body_replacer(table), text)
    return text


def readme_main(
    readme: Path,
    make_tables: Callable[[], Mapping[str, str]],
    *,
    prog: str,
    argv: Sequence[str] | None = None,
) -> int:
    """`--write` rewrites the README's blocks from `make_tables()`; `--check` exits 1 (one
    line naming the README) when they differ."""
    parser = argparse.ArgumentParser(prog=prog)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="rewrite the README's blocks")
    mode.add_argument("--check", action="store_true", help="exit 1 if the README differs")
    args = parser.parse_args(argv)
    current = readme.read_text(encoding="utf-8")
    updated = render_blocks(current, make_tables())
    if args.check:
        if updated != current:
            print(f"{readme}: generated tables differ; run with --write", file=sys.stderr)
            return 1
        return 0
    readme.write_text(updated, encoding="utf-8")
    return 0
