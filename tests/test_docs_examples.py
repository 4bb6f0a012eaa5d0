"""The documentation's examples: every --plot path it shows writes under runs/, which git ignores."""

from __future__ import annotations


def test_the_documented_examples_write_under_runs():
    import re

    from helpers import ROOT

    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    plots = [p for doc in docs for p in re.findall(r"--plot (\S+)", doc.read_text())]
    assert plots and all(p.startswith(("runs/", "FILE")) for p in plots), plots
    assert "/runs/" in (ROOT / ".gitignore").read_text().split()
