"""Reading a scenario's YAML: the data, and its node tree for line numbers.

The rules are YAML 1.2's core schema, so a value means what a person reads: `0042` is 42 (not
octal 34), `10:00` is text (not 600), `yes`, `no`, `on` and `off` are text (only true and false
are booleans), `1e9` is a number, dates are text. Digits may be grouped with `_` (1_000). Also:
PyYAML's safe loader (never a Python object), a key given twice is an error, every key is text,
a `name` or `trace` is the text as written (`name: 1.0` is "1.0"), and aliases and merge keys
(`<<`) may not build more than MAX_YAML_VALUES values (nor a value that contains itself).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from ..errors import InputError
from ..inputs import read_input
from .limits import MAX_YAML_VALUES
from .schema import _show

_STR, _NULL = "tag:yaml.org,2002:str", "tag:yaml.org,2002:null"
TEXT_KEYS = ("name", "trace")  # whose values are text however they look


class _DuplicateKey(Exception):
    def __init__(self, key: str, line: int, first: int):
        super().__init__(key)
        self.key, self.line, self.first = key, line, first


class _KeyNotText(Exception):
    def __init__(self, shown: str, line: int):
        super().__init__(shown)
        self.shown, self.line = shown, line


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader (no Python objects, ever) with YAML 1.2 core scalars, rejecting keys
    given twice and keys that are not text."""


_Loader.yaml_implicit_resolvers = {}
for _tag, _pattern, _first in (
    ("bool", r"true|True|TRUE|false|False|FALSE", "tTfF"),
    ("int", r"[-+]?[0-9][0-9_]*|0o[0-7_]+|0x[0-9a-fA-F_]+", "-+0123456789"),
    ("float", r"[-+]?(?:\.[0-9][0-9_]*|[0-9][0-9_]*(?:\.[0-9_]*)?)(?:[eE][-+]?[0-9]+)?", "-+.0123456789"),
    ("float", r"[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)", "-+."),
    ("null", r"~|null|Null|NULL|", ["~", "n", "N", ""]),
    ("merge", r"<<", "<"),
):
    _Loader.add_implicit_resolver(f"tag:yaml.org,2002:{_tag}", re.compile(f"^(?:{_pattern})$"), list(_first))


def _construct_int(loader: _Loader, node: yaml.ScalarNode) -> int:
    text = loader.construct_scalar(node).replace("_", "")
    if text.startswith(("0o", "0x")):
        return int(text[2:], 8 if text[1] == "o" else 16)
    return int(text, 10)  # 0042 is 42: YAML 1.2 has no implicit octal


def _construct_float(loader: _Loader, node: yaml.ScalarNode) -> float:
    text = loader.construct_scalar(node).replace("_", "").lower()
    if text.lstrip("+-") == ".inf":
        return float("-inf") if text.startswith("-") else float("inf")
    return float("nan") if text == ".nan" else float(text)


def _construct_map(loader: _Loader, node: yaml.MappingNode):
    seen: dict[Any, int] = {}
    for key_node, value_node in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
            if not isinstance(key_node, yaml.ScalarNode):
                raise _KeyNotText("a list or mapping", key_node.start_mark.line + 1)
            continue
        key = loader.construct_object(key_node)
        line = key_node.start_mark.line + 1
        if not isinstance(key, str):
            written = key_node.value or "''"
            raise _KeyNotText(_show(key) if key is not None else f"{written} (an empty value)", line)
        if key in seen:
            raise _DuplicateKey(str(key), line, seen[key])
        seen[key] = line
        if key in TEXT_KEYS and isinstance(value_node, yaml.ScalarNode) and value_node.tag != _NULL:
            value_node.tag = _STR  # `name: off`, `name: 1.0`: the text as written
    yield from yaml.constructor.SafeConstructor.construct_yaml_map(loader, node)


_Loader.add_constructor("tag:yaml.org,2002:int", _construct_int)
_Loader.add_constructor("tag:yaml.org,2002:float", _construct_float)
_Loader.add_constructor("tag:yaml.org,2002:map", _construct_map)


def _written_size(root: yaml.Node) -> int:
    """How many values the file writes: each node once, however often aliases use it."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            stack.extend(n for pair in node.value for n in pair)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
    return len(seen)


def _expanded_size(root: yaml.Node, source: str) -> int:
    """How many values constructing `root` would build, counting every alias and merge key
    (`<<`) at each place it is used; InputError past MAX_YAML_VALUES or for a value that
    contains itself. Linear in the nodes written: each node's size is computed once. A file that
    writes more values than that without aliases is bounded by its size (MAX_SCENARIO_BYTES): the
    limit is then what it writes (a long schedule is told its own limit by the schema)."""
    limit = max(MAX_YAML_VALUES, _written_size(root))
    sizes: dict[int, int] = {}
    busy: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if key in sizes:
            continue
        if isinstance(node, yaml.ScalarNode):
            sizes[key] = 1
            continue
        children = [n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode) else list(node.value)
        if not children_done:
            if key in busy:
                line = node.start_mark.line + 1
                raise InputError(f"{source}:{line}: got a value that contains itself (a YAML alias to its own anchor), "
                                 f"expected a plain scenario")
            busy.add(key)
            stack.append((node, True))
            stack.extend((c, False) for c in children if id(c) not in sizes)
            continue
        busy.discard(key)
        total = 1 + sum(sizes[id(c)] for c in children)
        sizes[key] = total
        if total > limit:
            line = node.start_mark.line + 1
            raise InputError(f"{source}:{line}: got YAML aliases or merge keys (<<) that expand to more than "
                             f"{limit:,} values, expected a plain scenario")
    return sizes[id(root)]


def parse_yaml(text: str, source: str) -> tuple[Any, yaml.Node | None]:
    """The data in `text` and its node tree (for line numbers); InputError if it is not YAML."""
    try:
        loader = _Loader(text)
    except yaml.reader.ReaderError as err:  # a control character: refused before parsing
        line_no = text[: err.position].count("\n") + 1
        raise InputError(
            f"{source}:{line_no}: got the character {chr(err.character)!r} (U+{err.character:04X}), expected printable text"
        ) from None
    try:
        node = loader.get_single_node()
        if node is not None:
            _expanded_size(node, source)
        return (loader.construct_document(node) if node is not None else None), node
    except _DuplicateKey as d:
        raise InputError(
            f"{source}:{d.line}: {d.key}: got this key a second time (first on line {d.first}), expected each key once"
        ) from None
    except _KeyNotText as k:
        raise InputError(f"{source}:{k.line}: got the key {k.shown}, expected keys that are text") from None
    except yaml.constructor.ConstructorError as err:
        line = f":{err.problem_mark.line + 1}" if err.problem_mark is not None else ""
        tag = re.search(r"tag '([^']*)'", err.problem or "")
        if tag:
            shown = tag.group(1).replace("tag:yaml.org,2002:", "!!")
            raise InputError(
                f"{source}{line}: got the YAML tag {shown}, expected plain values (numbers, text, lists, mappings)"
            ) from None
        raise InputError(f"{source}{line}: malformed YAML: {err.problem}") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        shown = ""
        if mark is not None and mark.line < len(lines := text.splitlines()) and lines[mark.line].strip():
            shown = f", in {_show(lines[mark.line].strip())}"
        raise InputError(f"{source}{line}: malformed YAML: {problem}{shown}") from None
    except RecursionError:
        raise InputError(f"{source}: malformed YAML: nested too deeply, expected a plain scenario") from None
    finally:
        loader.dispose()


def read_text_file(path: Path, what: str, max_bytes: int) -> str:
    """A regular UTF-8 file's text, or a one-line InputError saying what is wrong with it."""
    raw = read_input(path, what, max_bytes)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        raise InputError(f"{path}:{line}: got the byte {raw[err.start]:#04x}, expected UTF-8 text") from None


