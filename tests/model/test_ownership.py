"""Issue 36: the model's state is split into typed classes, each owned by the module that defines it
(docs/architecture.md, "Owned parts"): no module of the model writes another's attributes.

What it checks, on the source of every module of `disagg_simpy/model/` (its AST, no run):
- the guarded classes are `PARTS` below (every class of the model that holds state, or named there as not
  guarded, with why: the first test); each is owned by the module that defines it. A class's *names* are its
  attributes (every `self.X = ...` in its body, its class-level names) and its methods. A write is attributed
  by the name written alone, so a name that guarded classes of two owners share (`n_replies` of `Batch` and
  `Repeat`) counts as each owner's: no owner but the only one may write it other than through `self`
  (sound: a write it cannot attribute is a write; `test_a_name_of_two_owners_is_guarded_for_each`);
- in every module other than a name's only owner, it fails on
  - an attribute store, augmented store or delete `E.X` with X a guarded name, unless E is the bare
    name `self` of a method (a method of a class of this module writing its own instance: no class
    of the model subclasses another module's guarded class, which the first test checks);
  - a subscript store or delete `E.X[...]`, or a mutating call `E.X.append(...)` (`MUTATORS`), or
    `heappush/heappop/heapify(E.X, ...)`, on a guarded name X (a list, dict, deque or array of a part);
  - the same through a local alias: a name bound (in the same function, or a function it is nested in)
    to `E.X` or to `E.X.<mutator>` (e.g. `waiting = gpu.queue.waiting` then `waiting.popleft()`, or
    `append = gpu.log.runs_start.append` then `append(t)`);
  - any `setattr(...)` call (it could write any name).
- Allowed exceptions: `EXCEPTIONS` below, each with its reason (none: E9's modules call methods too since
  h-paged's change, issue 36), and none stale (`test_every_exception_is_needed`). Not a write of
  another module, so not flagged: a part's own method that hands out bound writers of its fields, which the
  owner chooses (`GpuLog.writers`, the GPU loop's records at each iteration end: a method call there costs
  2-3% of a run's Python opcodes, `benchmarks/ab.py --opcodes`, on a path at the edge of issue 36's speed target).
`test_a_planted_write_fails` plants writes from another module and sees each fail."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

MODEL = Path(__file__).resolve().parents[2] / "disagg_simpy" / "model"

# guarded class -> the module (file stem in model/) that defines and so owns it: every class of the model that holds
# state. Not guarded: Protocols and TypedDicts (types, no state); `phases.Slot`, a SimPy `Event` whose every field is
# SimPy's (`callbacks`, `_ok`, `_value`, `env`): adding a callback to an event is how SimPy is used, and phases.py is the
# one module that touches SimPy's internals.
PARTS = {
    "Gpu": "gpu",  # the GPU's own state: its identity, role, flags and run (model/gpu.py)
    "PromptQueue": "prompts",  # queue: prompts waiting, tokens queued, the chunk (D1, D4)
    "Batch": "batch",  # batch: replies in progress, seats, the leaving order, E3's context sum, E10's count, E16's draws
    "Memory": "memory",  # memory: E4's KV counter (tokens held, peak)
    "GpuLog": "records",  # log: the records a run leaves (runs, reads, E4's memory log)
    "Request": "request",  # a request's state and record: its times, GPUs, tokens unread, E13's ids, E9's fields
    "Engine": "engine",  # the arrangement's run: GPUs, sides, the handoff queue (E4e), arrivals, counts, give-up
    "GiveUp": "engine",  # the give-up limits (frozen)
    "Side": "router",  # a side's GPUs, in D2's order too (never assigned first, then oldest assignment first)
    "Link": "kv_link",  # an E5 link: busy, its ships waiting
    "KvLink": "kv_link",  # the links and how a ship finds its link
    "RoleController": "roles",  # E12: the moves under way, the switches, the target
    "Switch": "roles",  # E12: one move (a row of switches.csv)
    "Repeat": "repeats",  # a repeat: its iterations' times, chunks taken, policies' work applied, cut or not
    "CostNs": "costs",  # the cost figures (frozen)
    "ContextSteps": "costs",  # E16 with E3: the context's uneven growth per iteration
    "PrefixCache": "prefix_cache",  # E13: an instance's cached blocks, pins, hits
    "CacheBlockIds": "prefix_cache",  # E13: the workload's block ids, sliced per request
    "ArrangementRecords": "records",  # a run's records
    "WriteView": "words",  # the writing iterations' view (frozen)
    "Stretches": "words",  # the stretches' view (frozen)
    "PagedKv": "paged_kv",  # E9's memory policy: blocks held, the running order, preemptions, the swap queue
    "BlockSchedule": "kv_blocks",  # E9's due blocks, by key
}
MUTATORS = {"append", "appendleft", "extend", "extendleft", "pop", "popleft", "insert", "remove", "clear", "fromlist",
            "frombytes", "update", "setdefault", "sort", "reverse", "add", "discard", "move_to_end", "popitem"}
HEAP_WRITERS = {"heappush", "heappop", "heapify", "heapreplace", "heappushpop"}
# (module, guarded name) -> why that module may write it: none (every entry must be needed,
# `test_every_exception_is_needed`)
EXCEPTIONS: dict[tuple[str, str], str] = {}


def class_names(tree: ast.Module, cls: str) -> set[str]:
    """The attributes and methods of class `cls` in a module's tree."""
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            names = set()
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names.add(item.name)
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    names.add(item.target.id)
                elif isinstance(item, ast.Assign):
                    names |= {t.id for t in item.targets if isinstance(t, ast.Name)}
                    if any(isinstance(t, ast.Name) and t.id == "__slots__" for t in item.targets):
                        names |= {e.value for e in ast.walk(item.value) if isinstance(e, ast.Constant)}
            for sub in ast.walk(node):
                if isinstance(sub, (ast.Attribute)) and isinstance(sub.ctx, ast.Store) and (
                        isinstance(sub.value, ast.Name) and sub.value.id == "self"):
                    names.add(sub.attr)
            names.discard("__slots__")
            return {n for n in names if not (n.startswith("__") and n.endswith("__"))}
    raise AssertionError(f"model/{PARTS[cls]}.py defines no class {cls}")


def owners() -> dict[str, frozenset[str]]:
    """Guarded name -> the modules that own a guarded class with that name (most names: one)."""
    owner: dict[str, set[str]] = {}
    for cls, module in PARTS.items():
        for name in class_names(ast.parse((MODEL / f"{module}.py").read_text()), cls):
            owner.setdefault(name, set()).add(module)
    return {name: frozenset(modules) for name, modules in owner.items()}


METHOD_SELF: set[int] = set()  # ids of the `self` names inside methods of a class of the module being checked


def _guarded(node: ast.AST, owner: dict[str, frozenset[str]], module: str) -> str | None:
    """`E.X` with X a guarded name that a guarded class of a module other than `module` has, E not a method's
    `self`: X; else None. (A name of two owners' classes, such as `n_replies` of `Batch` and `Repeat`, cannot
    be attributed by name alone, so it counts as each owner's: only `self` may write it in either.)"""
    if isinstance(node, ast.Attribute) and (modules := owner.get(node.attr)) is not None and (
            modules != {module}) and (module, node.attr) not in EXCEPTIONS:
        if id(node.value) not in METHOD_SELF:
            return node.attr
    return None


def _method_selves(tree: ast.Module) -> set[int]:
    """The `self` names used inside the methods of the module's classes (a method's first argument)."""
    found = set()
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        for method in cls.body:
            if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)) and method.args.args and (
                    method.args.args[0].arg == "self"):
                found |= {id(n) for n in ast.walk(method) if isinstance(n, ast.Name) and n.id == "self"}
    return found


def _targets(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, (ast.Tuple, ast.List)):
        return [t for e in node.elts for t in _targets(e)]
    if isinstance(node, ast.Starred):
        return _targets(node.value)
    return [node]


def _aliases(func: ast.AST, owner: dict[str, frozenset[str]], module: str) -> tuple[dict[str, str], dict[str, str]]:
    """In `func` (with what it nests): names bound to a guarded container `E.X` and to a guarded
    container's mutator `E.X.m`: name -> X."""
    containers: dict[str, str] = {}
    mutators: dict[str, str] = {}
    for node in ast.walk(func):
        if isinstance(node, ast.Assign):
            pairs: list[tuple[ast.AST, ast.AST]] = []
            for target in node.targets:
                if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple) and (
                        len(target.elts) == len(node.value.elts)):
                    pairs += zip(target.elts, node.value.elts)
                else:
                    pairs.append((target, node.value))
            for target, value in pairs:
                if not isinstance(target, ast.Name):
                    continue
                if (x := _guarded(value, owner, module)) is not None:
                    containers[target.id] = x
                elif isinstance(value, ast.Attribute) and value.attr in MUTATORS and (
                        x := _guarded(value.value, owner, module)) is not None:
                    mutators[target.id] = x
        elif isinstance(node, ast.NamedExpr) and (x := _guarded(node.value, owner, module)) is not None:
            containers[node.target.id] = x
    return containers, mutators


def writes(module: str, source: str, owner: dict[str, frozenset[str]]) -> list[str]:
    """Every write of another module's guarded name in `source` (module `module`): 'line: what'."""
    tree = ast.parse(source)
    METHOD_SELF.clear()
    METHOD_SELF.update(_method_selves(tree))
    found = []
    funcs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    scopes = [(f, *_aliases(f, owner, module)) for f in funcs] + [(tree, {}, {})]
    seen: set[int] = set()
    for scope, containers, mutators in scopes:
        for node in ast.walk(scope):
            if id(node) in seen:
                continue
            seen.add(id(node))
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
                targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
                for t in (t for target in targets for t in _targets(target)):
                    if (x := _guarded(t, owner, module)) is not None:
                        found.append(f"{node.lineno}: writes .{x}")
                    elif isinstance(t, ast.Subscript):
                        base = t.value
                        if (x := _guarded(base, owner, module)) is not None:
                            found.append(f"{node.lineno}: stores into .{x}[...]")
                        elif isinstance(base, ast.Name) and base.id in containers:
                            found.append(f"{node.lineno}: stores into {base.id}[...] (.{containers[base.id]})")
            elif isinstance(node, ast.Call):
                f = node.func
                if isinstance(f, ast.Name) and f.id == "setattr":
                    found.append(f"{node.lineno}: setattr")
                elif isinstance(f, ast.Attribute) and f.attr in MUTATORS:
                    if (x := _guarded(f.value, owner, module)) is not None:
                        found.append(f"{node.lineno}: .{x}.{f.attr}(...)")
                    elif isinstance(f.value, ast.Name) and f.value.id in containers:
                        found.append(f"{node.lineno}: {f.value.id}.{f.attr}(...) (.{containers[f.value.id]})")
                elif isinstance(f, ast.Name) and f.id in mutators:
                    found.append(f"{node.lineno}: {f.id}(...) (a mutator of .{mutators[f.id]})")
                heap = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
                if heap in HEAP_WRITERS and node.args:
                    a = node.args[0]
                    if (x := _guarded(a, owner, module)) is not None or (
                            isinstance(a, ast.Name) and (x := containers.get(a.id)) is not None):
                        found.append(f"{node.lineno}: {heap}(.{x})")
    return sorted(set(found), key=lambda s: int(s.split(":")[0]))


def all_writes() -> dict[str, list[str]]:
    owner = owners()
    out = {}
    for path in sorted(MODEL.glob("*.py")):
        if w := writes(path.stem, path.read_text(), owner):
            out[path.stem] = w
    return out


def test_guarded_classes_exist_and_every_class_of_the_model_is_guarded_or_said_why_not():
    """Every class of the model that holds state is in `PARTS` (or named above as not guarded); a method's
    `self` is an instance of its own module's class (no class subclasses another module's guarded class)."""
    owner = owners()
    for cls, module in PARTS.items():
        assert class_names(ast.parse((MODEL / f"{module}.py").read_text()), cls)
    assert {"draining", "waiting", "n_replies", "used", "runs_start", "first_word_at_ns", "busy", "gpus"} <= owner.keys()
    unguarded = {"Slot", "Environment"}  # (the reasons: above `PARTS`)
    for path in MODEL.glob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if not isinstance(node, ast.ClassDef):
                continue
            bases = {b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else "" for b in node.bases}
            if not bases & {"Protocol", "TypedDict"} and node.name not in unguarded:
                assert PARTS.get(node.name) == path.stem, f"model/{path.name}: class {node.name} is not guarded (PARTS)"
            inherited = {PARTS[b] for b in bases if b in PARTS} - {path.stem}
            assert not inherited, f"model/{path.name}: {node.name} subclasses a guarded class of {inherited}"


def test_every_exception_is_needed():
    """An exception that no write needs is stale."""
    owner = owners()
    for module, name in list(EXCEPTIONS):
        source = (MODEL / f"{module}.py").read_text()
        reason = EXCEPTIONS.pop((module, name))
        try:
            assert any(f".{name}" in w for w in writes(module, source, owner)), f"stale exception ({module}, {name})"
        finally:
            EXCEPTIONS[(module, name)] = reason


def test_no_module_of_the_model_writes_another_modules_part():
    found = all_writes()
    assert not found, "writes of another module's part (call a method of the part instead):\n" + "\n".join(
        f"model/{m}.py:{w}" for m, ws in found.items() for w in ws)


@pytest.mark.parametrize("planted", [
    "def f(gpu):\n    gpu.memory.used += 1\n",  # augmented store
    "def f(gpu):\n    gpu.memory.peak = 0\n",  # store
    "def f(gpu, k):\n    gpu.log.runs_ends[k] = 0\n",  # subscript store
    "def f(gpu):\n    gpu.log.reads_log.fromlist([1, 2, 3])\n",  # mutating call
    "def f(gpu):\n    log = gpu.log.kv_used_tokens\n    def g():\n        log.append(3)\n    return g\n",  # alias
    "def f(gpu):\n    add = gpu.log.runs_start.append\n    add(3)\n",  # alias of a mutator
    "import heapq\ndef f(gpu):\n    heapq.heappush(gpu.ships_due, 3)\n",  # heap
    "def f(gpu):\n    gpu.queue.queued_tokens -= 5\n",
    "def f(gpu):\n    gpu.batch.n_replies += 1\n",
    "def f(gpu, k):\n    gpu.batch.leaving[k] = []\n",
    "import heapq\ndef f(gpu):\n    order = gpu.batch.leaving_order\n    heapq.heappop(order)\n",
    "def f(kv):\n    kv.gpu.batch.seat_queue.append(None)\n",
    "def f(gpu):\n    waiting = gpu.queue.waiting\n    waiting.insert(0, None)\n",
    "def f(g):\n    g.draining = True\n",  # the GPU's own
    "def f(g):\n    g.has_work = lambda: True\n",  # a method replaced per instance
    "def f(g):\n    setattr(g, 'draining', True)\n",
    "def f(self):\n    self.memory.used = 0\n    self.draining = True\n",  # `self` outside a method of this module
    "def f(r, t):\n    r.finished_at_ns = t\n",  # a request's field (model/request.py)
    "def f(r, n):\n    r.unread_tokens -= n\n",
    "def f(engine, g):\n    engine.reading.gpus = (g,)\n",  # a side's GPUs (model/router.py)
    "def f(link, r):\n    link.ships.append(r)\n",  # an E5 link's queue (model/kv_link.py)
    "def f(records):\n    records.switches = {}\n",  # a run's records (model/records.py)
    "def f(gpu):\n    gpu.paged.blocked = True\n",  # E9's parts
    "def f(kv, r):\n    del kv.running[r]\n",
    "def f(kv, r):\n    kv.swapped.insert(0, r)\n",
    "def f(kv, r):\n    kv.due_blocks.pending[3] = [r]\n",
    "def f(kv):\n    phases = kv.due_blocks.phases\n    phases.clear()\n",
])
def test_a_planted_write_fails(planted):
    """Each kind of write, planted in a module that owns no part (planner.py's name), is found."""
    assert writes("planner", planted, owners())


def test_an_owner_and_reads_pass():
    """The owner writes its own part; any module reads another's, and writes through `self` its own objects."""
    owner = owners()
    assert not writes("memory", "class Memory:\n    def f(self, gpu):\n        gpu.memory.used = 1\n", owner)
    assert not writes("planner", "def f(gpu):\n    n = gpu.memory.used\n    w = gpu.log.runs_stop\n"
                                 "    return n + len(w) + w[0]\n", owner)
    assert not writes("repeats", "class Repeat:\n    def f(self):\n        self.n_replies = 1\n", owner)


def test_a_name_of_two_owners_is_guarded_for_each():
    """`n_replies` is a name of `Batch` (batch.py) and of `Repeat` (repeats.py): repeats.py writes its own through `self`
    only, and writes no batch's, nor batch.py a repeat's; a third module neither."""
    owner = owners()
    assert owner["n_replies"] == {"batch", "repeats"}
    assert writes("repeats", "class Repeat:\n    def f(self, gpu):\n        gpu.batch.n_replies = 1\n", owner)
    assert writes("repeats", "def f(repeat):\n    repeat.n_replies = 1\n", owner)
    assert writes("batch", "def f(gpu):\n    gpu.repeat.n_replies = 1\n", owner)
    assert writes("planner", "def f(gpu):\n    gpu.batch.n_replies += 1\n", owner)
    assert not writes("batch", "class Batch:\n    def f(self):\n        self.n_replies += 1\n", owner)
