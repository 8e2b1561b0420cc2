"""The notes that open a report before its results: code amendments, errata and a suite's headline (for wmf, the
training adequacy). A note with many or long items folds behind its opening line (`page.Fold`: HTML `<details>`,
Markdown a count and a link) and is listed in full at the end of the report."""

from __future__ import annotations

import re
from collections.abc import Sequence

from cltoolkit.protocol.models import ProtocolBase
from cltoolkit.report.page import fold_marker

__all__ = [
    "AMENDMENTS_IN_FULL",
    "COMPACT_AFTER",
    "FOLD_CHARACTERS",
    "amendment_lines",
    "amendments_in_full",
    "errata_lines",
    "folded",
]


def folded(lines: list[str]) -> tuple[list[str], list[str]]:
    """A note that opens the report (an opening paragraph, then bullets) as it opens it, and its section in full
    for the end of the report: with more than `COMPACT_AFTER` bullets or more than `FOLD_CHARACTERS` of them, the
    bullets fold behind the paragraph (see `page.Fold`) and the end section lists them; otherwise the note as it is
    and no end section."""
    bullets = [line for line in lines if line.startswith("- ")]
    if not _long(bullets):
        return lines, []
    opening = " ".join(line for line in lines[: lines.index(bullets[0])] if line.strip())
    lead = re.match(r"\*\*([^*:]+)", opening)
    full = f"{lead.group(1).strip() if lead else 'Opening notes'} in full"
    return [fold_marker(full), opening, "", *bullets, ""], [f"## {full}", "", opening, "", *bullets, ""]


def amendment_lines(p: ProtocolBase) -> list[str]:
    """Code amendments (`status.codeAmendments`): changes of pinned component code after the freeze, printed
    before everything else that rests on the records, as not pre-registered."""
    amendments = p.status.codeAmendments if p.status else []
    if not amendments:
        return []
    compact = _long([a.reason for a in amendments])
    return [
        *([fold_marker(AMENDMENTS_IN_FULL)] if compact else []),
        f"**Code amendments: {len(amendments)} change(s) of the pinned evaluator after this protocol was frozen "
        "(not pre-registered).** Runs of the amended code are accepted beside runs of the frozen code"
        + ("." if compact else ":"),
        "",
        *(
            f"- {a.on.isoformat()}, `{a.component}` now `{a.sourceSha256[:19]}...`: "
            + (_first_sentence(a.reason) if compact else a.reason)
            for a in amendments
        ),
        "",
    ]


AMENDMENTS_IN_FULL = "Code amendments in full"


COMPACT_AFTER = 3
"""A note that opens the report with more items than this (code amendments, errata, the suite's headline), or with
more than `FOLD_CHARACTERS` of them, folds them behind its opening line (HTML: inside a `<details>`; Markdown: a
count and a link) and lists them in full at the end of the report."""
FOLD_CHARACTERS = 600


def _long(items: Sequence[str]) -> bool:
    """Whether a note's items fold (see `COMPACT_AFTER`)."""
    return len(items) > COMPACT_AFTER or sum(map(len, items)) > FOLD_CHARACTERS


def _first_sentence(text: str, limit: int = 200) -> str:
    """The first sentence of `text` (or its first `limit` characters), marked when shortened."""
    end = text.find(". ")
    head = text if end < 0 else text[: end + 1]
    if len(head) > limit:
        return head[:limit].rsplit(" ", 1)[0] + " [...]"
    return head if head == text else head + " [...]"


def amendments_in_full(p: ProtocolBase) -> list[str]:
    """The full texts of the code amendments the report opened with in one line each."""
    amendments = p.status.codeAmendments if p.status else []
    if not _long([a.reason for a in amendments]):
        return []
    return [
        f"## {AMENDMENTS_IN_FULL}",
        "",
        *(f"- {a.on.isoformat()}, `{a.component}` now `{a.sourceSha256}`: {a.reason}" for a in amendments),
        "",
    ]


def errata_lines(p: ProtocolBase) -> list[str]:
    """Differences from the reference found after the freeze (`status.errata`): outside the hash, so the reader is
    told they were not pre-registered, with when each was found."""
    errata = p.status.errata if p.status else []
    if not errata:
        return []
    return [
        f"**Errata: {len(errata)} difference(s) from the reference found after this protocol was frozen.** They are "
        "recorded in its status (outside the hash), not in its pre-registered disclosures; the results below were "
        "computed with them in place.",
        "",
        *(f"- Found {e.found.isoformat()}: {e.text}" + (f" (reference: {e.where})" if e.where else "") for e in errata),
        "",
    ]
