"""The report's page model: one list of blocks, written as Markdown and as HTML by two writers.

What a block is (a heading, a paragraph, a bullet, a table, a figure slot) and what it means (the verdict, a
warning) are fields of the block, so rewording a line never changes how the page shows it. Text inside a block is
Markdown inline text (`**bold**`, `` `code` ``), which both writers keep: the Markdown one as it is, the HTML one
as <b> and <code>. Suites hand their sections over as Markdown text; `parse_markdown` turns that into blocks once,
by syntax alone (`#` headings, `- ` bullets, `|` table rows, blank lines, `<!-- fold: ... -->` before a paragraph and
its bullets), never by wording."""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "Blank",
    "Block",
    "Figures",
    "Fold",
    "Heading",
    "Item",
    "Page",
    "Paragraph",
    "Table",
    "fold_marker",
    "parse_markdown",
    "slug",
]

Role = Literal["plain", "verdict", "warning"]


@dataclass(frozen=True)
class Heading:
    level: int
    text: str


@dataclass(frozen=True)
class Paragraph:
    text: str
    role: Role = "plain"


@dataclass(frozen=True)
class Item:
    """One bullet."""

    text: str
    role: Role = "plain"


@dataclass(frozen=True)
class Table:
    """A Markdown table: its header row, the separator row and the body rows, as Markdown lines."""

    lines: tuple[str, ...]


@dataclass(frozen=True)
class Figures:
    """Where a section's figures go (HTML only; the Markdown report lists no images)."""

    section: str


@dataclass(frozen=True)
class Blank:
    """A blank line (it separates blocks in Markdown; HTML needs nothing for it)."""


@dataclass(frozen=True)
class Fold:
    """A long list folded behind its opening line, so a reader reaches the results first: in HTML a `<details>`
    (the line; the items when opened), in Markdown the line with the count and a link to the section at the end of
    the report that holds the list in full (headed `full`)."""

    summary: str
    items: tuple[str, ...]
    full: str


Block = Heading | Paragraph | Item | Table | Figures | Blank | Fold

_FOLD = re.compile(r"<!-- fold: (.+) -->")


def fold_marker(full: str) -> str:
    """The line that folds the paragraph and bullets after it (see `Fold`); `full`: the heading of the full list."""
    return f"<!-- fold: {full} -->"


def slug(heading: str) -> str:
    """A heading's anchor as GitHub writes it (lower case, punctuation dropped, spaces as hyphens); the HTML
    report gives its headings the same ids."""
    kept = "".join(c for c in heading.lower() if c.isalnum() or c in " -_")
    return kept.replace(" ", "-")


def parse_markdown(text: str | Iterable[str]) -> list[Block]:
    """Blocks of Markdown text (a string, or its lines), by syntax alone: every role is `plain`."""
    lines = text.split("\n") if isinstance(text, str) else [x for chunk in text for x in chunk.split("\n")]
    blocks: list[Block] = []
    table: list[str] = []
    fold: list[str] | None = None  # [full heading, summary, items...] while a fold is open
    for line in lines:
        if fold is not None:
            if line.startswith("- "):
                fold.append(line[2:])
                continue
            if not line.strip() and len(fold) < 3:
                continue  # blank lines between the fold's summary and its first item
            if len(fold) == 1 and line.strip():
                fold.append(line)
                continue
            blocks.append(Fold(fold[1], tuple(fold[2:]), fold[0]))
            fold = None
        opening = _FOLD.fullmatch(line.strip())
        if opening:
            fold = [opening.group(1)]
            continue
        if line.startswith("|"):
            table.append(line)
            continue
        if table:
            blocks.append(Table(tuple(table)))
            table = []
        marker = re.fullmatch(r"<!-- figures:(\w+) -->", line.strip())
        if marker:
            blocks.append(Figures(marker.group(1)))
        elif line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            blocks.append(Heading(level, line[level:].strip()))
        elif line.startswith("- "):
            blocks.append(Item(line[2:]))
        elif line.strip():
            blocks.append(Paragraph(line))
        else:
            blocks.append(Blank())
    if table:
        blocks.append(Table(tuple(table)))
    if fold is not None and len(fold) > 1:
        blocks.append(Fold(fold[1], tuple(fold[2:]), fold[0]))
    return blocks


def _markdown_lines(block: Block) -> list[str]:
    if isinstance(block, Fold):
        return [f"{block.summary} {len(block.items)} listed in full under [{block.full}](#{slug(block.full)})."]
    if isinstance(block, Heading):
        return ["#" * block.level + " " + block.text]
    if isinstance(block, Paragraph):
        return [block.text]
    if isinstance(block, Item):
        return ["- " + block.text]
    if isinstance(block, Table):
        return list(block.lines)
    if isinstance(block, Figures):
        return []
    return [""]


DECISION_CLASS = {"PASS": "pass", "FAIL": "fail", "NOT EVALUABLE": "ne", "REPORTED": "rep"}
_WARN = ' style="color:#b00020"'


_DECISION = re.compile(r"\*\*(PASS|FAIL|NOT EVALUABLE|REPORTED)\*\*")
_BOLD = re.compile(r"\*\*(.+?)\*\*")
_CODE = re.compile(r"`(.+?)`")
_TAG = re.compile("<[^>]+>")


def _inline(text: str) -> str:
    """Markdown inline text as HTML: escaped, decisions coloured, `**bold**` and `` `code` ``."""
    out = html.escape(text)
    if "*" in out:
        out = _DECISION.sub(lambda m: f'<b class="{DECISION_CLASS[m.group(1)]}">{m.group(1)}</b>', out)
        out = _BOLD.sub(r"<b>\1</b>", out)
    return _CODE.sub(r"<code>\1</code>", out) if "`" in out else out


_WITH_RANGE = re.compile(r"(\S+) (\[[^\[\]]*\])")  # "median [min, max]", "estimate [lo, hi]"


def _td(cell: str) -> str:
    """A body cell: a value with its range may break between the two, never inside either (a table of many such
    columns then fits the page); other short cells (numbers, p-values, decisions) never wrap."""
    ranged = _WITH_RANGE.fullmatch(cell) if "[" in cell else None
    if ranged:
        return f"<td><span class='n'>{ranged[1]}</span> <span class='n'>{ranged[2]}</span></td>"
    short = len(_TAG.sub("", cell) if "<" in cell else cell) <= 24
    return f"<td class='n'>{cell}</td>" if short else f"<td>{cell}</td>"


def _table_html(table: Table) -> list[str]:
    out: list[str] = []
    for line in table.lines:
        cells = [c.strip() for c in _inline(line).strip("|").split("|")]
        if all(set(c) <= {"-"} for c in cells):
            continue
        row = "".join(f"<th>{c}</th>" for c in cells) if not out else "".join(_td(c) for c in cells)
        out.append(("<table>" if not out else "") + "<tr>" + row + "</tr>")
    return [*out, "</table>"] if out else []


def _html_lines(block: Block, figures: Mapping[str, str]) -> list[str]:
    if isinstance(block, Fold):
        items = "".join(f"<li>{_inline(item)}</li>" for item in block.items)
        return [f"<details><summary>{_inline(block.summary)} ({len(block.items)})</summary><ul>{items}</ul></details>"]
    if isinstance(block, Heading):
        return [f'<h{block.level} id="{slug(block.text)}">{_inline(block.text)}</h{block.level}>']
    if isinstance(block, Paragraph):
        if block.role == "verdict":
            return [f'<p id="verdict">{_inline(block.text)}</p>']
        return [f"<p{_WARN if block.role == 'warning' else ''}>{_inline(block.text)}</p>"]
    if isinstance(block, Item):
        return [f"<li{_WARN if block.role == 'warning' else ''}>{_inline(block.text)}</li>"]
    if isinstance(block, Table):
        return _table_html(block)
    if isinstance(block, Figures):
        return [figures.get(block.section, "")]
    return []


@dataclass(frozen=True)
class Page:
    blocks: tuple[Block, ...]

    def markdown(self) -> str:
        return "\n".join(line for block in self.blocks for line in _markdown_lines(block))

    def html_body(self, figures: Mapping[str, str] | None = None) -> str:
        """The page's HTML body; `figures`: section -> the HTML of its figures."""
        return "\n".join(line for block in self.blocks for line in _html_lines(block, figures or {}))
