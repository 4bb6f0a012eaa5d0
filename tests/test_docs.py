"""The documentation site against the code: the architecture page lists every module of the
package, and every rule id the package's docstrings and comments cite is on the rules page."""

from __future__ import annotations

import re

from helpers import ROOT

PACKAGE = ROOT / "disagg_simpy"
DOCS = ROOT / "docs"
#: the files a module map lists: Python modules and the HTML page's assets
MODULE_SUFFIXES = {".py", ".js", ".html", ".css"}


def _modules() -> set[str]:
    return {p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*")
            if p.suffix in MODULE_SUFFIXES and "__pycache__" not in p.parts}


def _module_map() -> dict[str, str]:
    """`| `path` | purpose |` rows of the architecture page's module map."""
    text = (DOCS / "architecture.md").read_text(encoding="utf-8").split("## Module map", 1)[1]
    return dict(re.findall(r"^\| `([^`]+)` \| (.*?) \|$", text, flags=re.M))


def test_the_architecture_page_lists_every_module_with_its_purpose():
    listed, present = _module_map(), _modules()
    missing, gone = sorted(present - set(listed)), sorted(set(listed) - present)
    assert not missing, f"add a row `| `{missing[0]}` | what it is for |` to docs/architecture.md's module map: {missing}"
    assert not gone, f"docs/architecture.md's module map lists modules that no longer exist: {gone}"
    assert all(purpose.strip() for purpose in listed.values())


#: a rule id: M1-M7, D1-D10, E1... with an optional part letter (E4f), or a reading (reading R9)
RULE_ID = re.compile(r"\b(?:[MD]\d{1,2}|E\d{1,2}[a-g]?)\b|(?<=reading )R\d{1,2}\b")


def _cited_ids() -> dict[str, str]:
    """Rule ids cited in the package's Python source (docstrings and comments), id -> a file."""
    cited = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for rule in RULE_ID.findall(path.read_text(encoding="utf-8")):
            cited.setdefault(rule, path.relative_to(ROOT).as_posix())
    return cited


def test_every_rule_the_code_cites_is_on_the_rules_page():
    rules = (DOCS / "rules.md").read_text(encoding="utf-8")
    defined = set(re.findall(r"\b(?:[MDER]\d{1,2}[a-g]?)\b", rules))
    cited = _cited_ids()
    assert {"M1", "D5", "E4e"} <= set(cited)  # the pattern finds citations at all
    undefined = {rule: where for rule, where in cited.items() if rule not in defined}
    assert not undefined, f"rule ids cited in the code but not defined in docs/rules.md: {undefined}"


def test_every_rule_and_reading_is_defined_once():
    """Parallel branches each took the next free reading number and collided after merging (E9's
    and E10's R45): every anchor on the rules page is defined once, and the readings run R1..Rn
    without a gap."""
    rules = (DOCS / "rules.md").read_text(encoding="utf-8")
    anchors = re.findall(r'id="([a-z0-9-]+)"|\{#([a-z0-9-]+)\}', rules)
    names = [a or b for a, b in anchors]
    twice = sorted({n for n in names if names.count(n) > 1})
    assert not twice, f"docs/rules.md defines these anchors more than once: {twice}"
    readings = sorted(int(n[1:]) for n in names if re.fullmatch(r"r\d+", n))
    assert readings == list(range(1, len(readings) + 1)), "the readings R1..Rn have a gap or a repeat"


def test_the_readme_stays_short_and_it_and_the_site_show_the_ci_commands():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 250
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    commands = [line for line in ci.splitlines() if line.startswith("python -m pip install")]
    assert len(commands) == 2 and all(line in readme for line in commands)
    index = (DOCS / "index.md").read_text(encoding="utf-8")  # the site's home shows the same two
    assert all(line in index for line in commands)
