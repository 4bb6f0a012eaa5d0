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


# -- stale references: names, files, rule ranges and commands the prose cites exist as cited

#: the package's folders, as prose names a module (`model/gpu.py`, `disagg_simpy/model/gpu.py`)
_STAGES = "|".join(sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()))
#: a module by path, with an optional name in it: `model/paged_kv.py`, `model/paged_kv.PagedKv`
_MODULE_PATH = re.compile(r"(?<![\w/.-])(?:disagg_simpy/)?((?:" + _STAGES
                          + r")/[\w/]+\.(?:py|json|js|html|css))(?:\.([A-Za-z_]\w*))?")
#: a file of the repository by path: tests/..., docs/..., benchmarks/..., scenarios/...
_REPO_PATH = re.compile(r"(?<![\w/.-])((?:tests|docs|benchmarks|scenarios)/[\w/.-]*\w\.(?:py|md|yaml|csv|jsonl|json))")
#: `module.name` in backticks, or module.Name / module._name / module.name( bare
_DOTTED = re.compile(r"`(\w+)\.([A-Za-z_]\w*)(?:\.\w+)*(?:\(\))?`|(?<![\w/.`])(\w+)\.([A-Z_]\w*|\w+(?=\())")
#: what follows a dot in a file's name, never a name in a module (summary.csv, plan.png, run.json)
_FILE_ENDINGS = {"csv", "png", "py", "md", "yaml", "yml", "json", "jsonl", "html", "sqlite", "parquet", "txt",
                 "js", "css", "gz", "svg"}
#: Stale names in disagg_simpy/model/, which only the model core's engineer edits (issue 36 is
#: refactoring it): listed here for them to fix, each (citing file, name cited). An entry that no
#: longer applies is harmless; remove it when its docstring is fixed.
_MODEL_STALE: set[tuple[str, str]] = set()


def _prose(path) -> str:
    """A Markdown file whole; a Python file's docstrings and comments (its code is checked by running it)."""
    import ast
    import io
    import tokenize

    text = path.read_text(encoding="utf-8")
    if path.suffix != ".py":
        return text
    nodes = (n for n in ast.walk(ast.parse(text))
             if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)))
    parts = [d for n in nodes if (d := ast.get_docstring(n, clean=False))]
    parts += [t.string for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type == tokenize.COMMENT]
    return "\n".join(parts)


def _defined(path) -> set[str]:
    """Every name a module defines or assigns anywhere (functions, classes, methods, attributes,
    imports): a name cited as `module.name` must be one of them."""
    import ast

    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
    return names


def _cited_names():
    """(citing file, what is cited, why it is stale or None) for every module path, repository
    file and `module.name` cited in the package's and the tests' docstrings and comments, the
    benchmarks', the README and the docs."""
    sources = [*sorted(PACKAGE.rglob("*.py")), *sorted((ROOT / "tests").rglob("*.py")),
               *sorted((ROOT / "benchmarks").rglob("*.py")), ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
    modules: dict[str, list] = {}
    for path in PACKAGE.rglob("*.py"):  # by name; a package by its folder's name (sweep.goodput)
        modules.setdefault(path.parent.name if path.stem == "__init__" else path.stem, []).append(path)
    from disagg_simpy.scenario.schema import Scenario

    keys = set(Scenario.model_fields)  # `workload.rate_per_s` is a scenario key, not a module's name
    defined: dict = {}

    def names(paths):
        out = set()
        for p in paths:
            out |= defined.setdefault(p, _defined(p))
            if p.stem == "__init__":  # a package's modules
                out |= {m.stem for m in p.parent.glob("*.py")} | {m.name for m in p.parent.iterdir() if m.is_dir()}
        return out

    for source in sources:
        where, text = source.relative_to(ROOT).as_posix(), _prose(source)
        for m in _MODULE_PATH.finditer(text):
            found = [p for p in (PACKAGE / m[1], source.parent / m[1], ROOT / "tests" / m[1]) if p.is_file()]
            if not found:
                yield where, m[0], "no such module in disagg_simpy/"
            elif m[2] and found[0].suffix == ".py" and m[2] not in _FILE_ENDINGS:
                yield where, m[0], None if m[2] in names(found[:1]) else f"{m[1]} defines no {m[2]}"
            else:
                yield where, m[0], None
        for m in _REPO_PATH.finditer(text):
            placeholder = re.search(r"[A-Z]{3}", m[1])  # scenarios/NAME.yaml
            yield where, m[1], None if placeholder or (ROOT / m[1]).exists() else "no such file"
        for m in _DOTTED.finditer(text):
            module, name = (m[1], m[2]) if m[1] else (m[3], m[4])
            if module in modules and module not in keys and name not in _FILE_ENDINGS:
                yield where, f"{module}.{name}", None if name in names(modules[module]) else f"no {name} in {module}"


def test_every_module_file_and_name_the_prose_cites_exists():
    """Docstrings and docs named code that had moved (`model/paged_kv.py`, `model/kv_blocks.py`
    after a refactor): every module path, repository file and `module.name` they cite exists in
    the tree as it is when the test runs."""
    cited = list(_cited_names())
    assert len({c for _, c, _ in cited}) > 150  # the patterns find citations at all
    stale = [f"{where}: {name} ({why})" for where, name, why in cited
             if why and (where, name) not in _MODEL_STALE]
    assert not stale, "stale references (fix the prose or the name):\n" + "\n".join(stale)


def _rule_ids() -> tuple[set[str], dict[str, int]]:
    """The ids docs/rules.md defines, and each family's last number (M7, D10, E15, R78)."""
    rules = (DOCS / "rules.md").read_text(encoding="utf-8")
    defined = set(re.findall(r"\b(?:[MDER]\d{1,2}[a-i]?)\b", rules))
    last: dict[str, int] = {}
    for rule in defined:
        if rule[1:].isdigit():
            last[rule[0]] = max(last.get(rule[0], 0), int(rule[1:]))
    return defined, last


#: a range of rule ids: M1-M7, E7-E10, R36-R44
_RANGE = re.compile(r"\b([MDER])(\d{1,2})-\1(\d{1,2})\b")
#: prose that names the rules as a whole, then lists them: "the model's rules (M1-M7, D1-D10, E1-E15)"
_ALL_RULES = re.compile(r"(?:the model's rules|optional (?:model )?rules|rule by rule)(?:[^.]|\.\w){0,40}?"
                        r"((?:\[?[MDER]\d{1,2}(?:-[MDER]\d{1,2})?\]?(?:\([^)]*\))?(?:,\s*|\s+)?)+)")


def test_rule_ranges_the_prose_quotes_match_the_rules_page():
    """README and pages listed "the model's rules (M1-M7, D1-D10, E1-E6...)" while E7-E15 existed:
    every range quoted outside the rules page runs between ids it defines, and where prose names
    the rules (or the optional rules) as a whole, a range from a family's first id runs to its
    last. The rules page's own table of ids covers every option it defines."""
    defined, last = _rule_ids()
    sources = [ROOT / "README.md", *sorted(p for p in DOCS.glob("*.md") if p.name != "rules.md"),
               *sorted(PACKAGE.rglob("*.py"))]
    wrong, wholes = [], 0
    for source in sources:
        where, text = source.relative_to(ROOT).as_posix(), _prose(source)
        for m in _RANGE.finditer(text):
            if f"{m[1]}{m[2]}" not in defined or f"{m[1]}{m[3]}" not in defined or int(m[2]) >= int(m[3]):
                wrong.append(f"{where}: {m[0]} (docs/rules.md defines {m[1]}1-{m[1]}{last[m[1]]})")
        for listing in _ALL_RULES.finditer(text):
            wholes += 1
            for m in _RANGE.finditer(listing[1]):
                if m[2] == "1" and int(m[3]) != last[m[1]]:
                    wrong.append(f"{where}: {m[0]} names all the rules, but they run {m[1]}1-{m[1]}{last[m[1]]}")
    assert wholes >= 3  # the pattern finds the listings at all
    assert not wrong, "rule ranges that do not match docs/rules.md:\n" + "\n".join(wrong)
    rules = (DOCS / "rules.md").read_text(encoding="utf-8")
    table = rules.split("## At a glance", 1)[0]
    listed = set()
    for cell in re.findall(r"^\| ([^|]+) \|", table, flags=re.M):
        for a, b in re.findall(r"E(\d+)(?:-E(\d+))?", cell):
            listed |= set(range(int(a), int(b or a) + 1))
    options = {int(n) for n in re.findall(r"^#+ .*\bE(\d+)\b", rules, flags=re.M)}
    assert options <= listed, f"docs/rules.md's table of ids lacks E{sorted(options - listed)}"


def test_every_command_and_every_page_is_where_a_reader_looks():
    """docs/commands.md never showed `presets`, and the home page had no row for four pages: each
    command of --help has its line in the synopsis of docs/commands.md, and each page of the site's
    navigation is linked from the home page's table."""
    import yaml

    from disagg_simpy.cli import COMMANDS

    commands = (DOCS / "commands.md").read_text(encoding="utf-8")
    synopsis = commands.split("```text", 1)[1].split("```", 1)[0]
    missing = [name for name in COMMANDS if f"python -m disagg_simpy {name}" not in synopsis]
    assert not missing, f"docs/commands.md's synopsis lacks the commands {missing}"
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8").split("\nnav:", 1)[1].join(["nav:", ""]))
    pages = [next(iter(entry.values())) for entry in nav["nav"]]
    index = (DOCS / "index.md").read_text(encoding="utf-8").split("## Where to go", 1)[1]
    unlinked = [page for page in pages if page != "index.md" and f"]({page})" not in index]
    assert len(pages) > 20 and not unlinked, f"docs/index.md's table links none of {unlinked}"
