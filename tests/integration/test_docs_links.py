"""The pages a user reads link only to what exists: every relative link of README.md, CHANGELOG.md and docs/*.md
names a file or folder of the repository, and every #anchor into a markdown page is one of its headings, slugged
as GitHub slugs them."""

import pathlib
import re
import unicodedata

import pytest

from tests.helpers import ROOT

PAGES = sorted(
    str(p.relative_to(ROOT)) for p in [ROOT / "README.md", ROOT / "CHANGELOG.md", *(ROOT / "docs").glob("*.md")]
)
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~)")


def prose(text: str) -> list[str]:
    """The lines outside fenced and indented code blocks, inline code spans removed."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        if not fenced and not line.startswith("    "):
            lines.append(re.sub(r"`[^`]*`", "", line))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase, markup and punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    kept = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LNM")
    return kept.replace(" ", "-")


def anchors(page: pathlib.Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    fenced = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line.lstrip()):
            fenced = not fenced
        m = None if fenced else re.match(r"#{1,6} (.+?)#*\s*$", line)
        if m:
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


def test_slugs_are_githubs():
    assert slug("The sampling correction's expected counts") == "the-sampling-corrections-expected-counts"
    assert slug("English→German") == "englishgerman"
    assert (
        slug("Side by side with OpenNMT-py 3.5.1 (`lab/bench/peer_decode.py`)")
        == "side-by-side-with-opennmt-py-351-labbenchpeer_decodepy"
    )


@pytest.mark.parametrize("page", PAGES)
def test_relative_links_and_anchors_resolve(page):
    path = ROOT / page
    broken = []
    for line in prose(path.read_text(encoding="utf-8")):
        for target in LINK.findall(line):
            if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
                continue
            file, _, anchor = target.partition("#")
            dest = (path.parent / file).resolve() if file else path
            if not dest.exists():
                broken.append(target)
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(target)
    assert broken == [], f"{page}: {broken}"
