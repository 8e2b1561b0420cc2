"""The report's page model: Markdown and HTML come from one list of blocks; styling follows the block's role,
never its wording; suites' Markdown becomes blocks by syntax and goes back out unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest

from cltoolkit.report.page import Blank, Figures, Heading, Item, Page, Paragraph, Table, parse_markdown

REPO = Path(__file__).resolve().parents[2]


def test_the_verdict_is_styled_by_its_role_not_its_words() -> None:
    page = Page((Paragraph("**Outcome:** 2 of 2 gates pass.", "verdict"), Blank(), Paragraph("**Verdict:** a word")))
    body = page.html_body()
    assert body.startswith('<p id="verdict"><b>Outcome:</b> 2 of 2 gates pass.</p>')
    assert "<p><b>Verdict:</b> a word</p>" in body  # the old prefix alone styles nothing
    assert page.markdown() == "**Outcome:** 2 of 2 gates pass.\n\n**Verdict:** a word"


def test_warnings_are_roles() -> None:
    page = Page((Paragraph("mixed code", "warning"), Item("run r1", "warning"), Item("WARNING: only words")))
    assert page.html_body().split("\n") == [
        '<p style="color:#b00020">mixed code</p>',
        '<li style="color:#b00020">run r1</li>',
        "<li>WARNING: only words</li>",
    ]


def test_tables_headings_and_figure_slots() -> None:
    blocks = parse_markdown("## Gates\n\n| a | b |\n|---|---|\n| **PASS** | 0.01 |\n\n<!-- figures:gates -->")
    assert blocks == [
        Heading(2, "Gates"),
        Blank(),
        Table(("| a | b |", "|---|---|", "| **PASS** | 0.01 |")),
        Blank(),
        Figures("gates"),
    ]
    page = Page(tuple(blocks))
    assert page.markdown() == "## Gates\n\n| a | b |\n|---|---|\n| **PASS** | 0.01 |\n"  # no image in Markdown
    assert page.html_body({"gates": "<figure>g</figure>"}).split("\n") == [
        '<h2 id="gates">Gates</h2>',
        "<table><tr><th>a</th><th>b</th></tr>",
        "<tr><td class='n'><b class=\"pass\">PASS</b></td><td class='n'>0.01</td></tr>",
        "</table>",
        "<figure>g</figure>",
    ]


def test_a_value_with_its_range_breaks_between_the_two_never_inside() -> None:
    """wmf-v3's per-cell table (eight "median [min, max]" columns) grew past a 1400 px page once cells had two
    different runs: such a cell may now break before its range; a long cell without one wraps as before."""
    row = "| 1.09e+04 [1.08e+04, 1.1e+04] | -8.13 | a note longer than 24 characters |"
    table = Table(("| PF | RD | note |", "|---|---|---|", row))
    assert Page((table,)).html_body().split("\n")[1] == (
        "<tr><td><span class='n'>1.09e+04</span> <span class='n'>[1.08e+04, 1.1e+04]</span></td>"
        "<td class='n'>-8.13</td><td>a note longer than 24 characters</td></tr>"
    )


@pytest.mark.parametrize("path", sorted(REPO.glob("reports/**/report.md")), ids=lambda p: str(p.relative_to(REPO)))
def test_every_committed_report_goes_through_the_model_unchanged(path: Path) -> None:
    text = path.read_text()
    assert Page(tuple(parse_markdown(text))).markdown() == text


def test_a_folded_note_is_one_line_in_markdown_and_a_closed_details_in_html() -> None:
    from cltoolkit.report.page import Fold, fold_marker, slug

    lines = [fold_marker("Errata in full"), "**Errata: 2 found.** After the freeze.", "", "- one `a`", "- two", ""]
    blocks = parse_markdown([*lines, "## Claims"])
    assert blocks[0] == Fold("**Errata: 2 found.** After the freeze.", ("one `a`", "two"), "Errata in full")
    assert blocks[-1] == Heading(2, "Claims")
    page = Page(tuple(blocks))
    assert page.markdown().split("\n")[0] == (
        "**Errata: 2 found.** After the freeze. 2 listed in full under [Errata in full](#errata-in-full)."
    )
    assert "one" not in page.markdown()  # the items live in the full section at the end
    html = page.html_body()
    assert html.startswith("<details><summary><b>Errata: 2 found.</b> After the freeze. (2)</summary><ul>")
    assert "<li>one <code>a</code></li><li>two</li></ul></details>" in html
    assert '<h2 id="claims">Claims</h2>' in html
    assert slug("Code amendments in full") == "code-amendments-in-full"


def test_the_report_folds_long_notes_and_lists_them_in_full_at_the_end() -> None:
    from cltoolkit.report.notes import folded

    short = ["**Note:** two items.", "", "- a", "- b", ""]
    assert folded(short) == (short, [])
    long = ["**Training adequacy: under-trained** (thresholds):", "", *(f"- cell {i}" for i in range(5)), ""]
    top, end = folded(long)
    assert top[0] == "<!-- fold: Training adequacy in full -->"
    assert end[:2] == ["## Training adequacy in full", ""]
    assert [x for x in end if x.startswith("- ")] == [f"- cell {i}" for i in range(5)]
    wordy = ["**Errata:** one long.", "", "- " + "x" * 700, ""]  # one item, but long
    assert folded(wordy)[1]
