"""The layers of ../shared/DESIGN.md, checked on the source: luabridge/ (Python) and lua/.

Python. Every import is read from the syntax tree: module level, inside functions and inside `if`
blocks alike, relative imports resolved, `from pkg import name` counted as an import of the
module pkg.name when there is one (else of pkg), importlib.import_module of a literal name as an
import of that module (of a computed name: of the targets listed in COMPUTED). Imports under
`if TYPE_CHECKING:` never run, yet they obey every rule and count in the cycle check (a type
that needs a circle to be named is a layering fault too). Importing luabridge.a.b runs the
package inits luabridge/__init__.py and luabridge/a/__init__.py first; those inits are the
start-up (they register the callbacks and providers of the layers above), so they count as
importers of what they import, not as something every module imports.

The rules (each has a test feeding the checker a made-up violation, so a rule that stops seeing
one fails too):
- ranks: the packages of luabridge/ in the order data flows (RANKS); an import goes to a lower
  rank or within its own package; inside core/, the finer order of LEAVES and BELOW;
- the face (luabridge/__init__.py and the public modules beside it, FACE) is imported by no one
  inside the package, and providers/ by the face alone (it is the start-up's to register);
- no private name (`_x`, or a module `_x` of another package) is imported from another module;
- no import cycles, TYPE_CHECKING imports included;
- lupa is imported by core/runtime.py alone (the one place that picks the LuaJIT module);
- the Lua halves mirror their Python halves: lua/luabridge/P.lua belongs to luabridge/P.py (or
  the package luabridge/P/);
- the callbacks Lua calls (`__luabridge_py`) are the declared table, providers/callbacks.py.
"""
from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ROOT = REPO / "luabridge"

# The packages of luabridge/, lowest first (DESIGN.md's layers, in the order data flows): each
# may import the ones of lower rank and itself. The front ends share a rank (none imports
# another); th/, the command line, stands on them (it converts to PyTorch).
RANKS = {
    "luabridge.core": 0,        # errors, paths, version, dtypes, memory, runtime, interop, proxy
    "luabridge.providers": 1,   # what Lua calls back (torch_cpu, torch_cuda, image, gnuplot, lfs, ...)
    "luabridge.t7": 2,          # the .t7 format, reader, writer and the Lua-backed load
    "luabridge.model": 3,       # Model, the module-tree naming
    "luabridge.graph": 4,       # symbol, registry, passes, executor, session, ops
    "luabridge.torch": 5,       # the front ends: the PyTorch bridge,
    "luabridge.tinyflow": 5,    # the tinyflow API,
    "luabridge.ray": 5,         # Ray,
    "luabridge.th": 6,          # and the command line,
    "luabridge.jupyter": 7,     # and the notebooks (the %%lua magic, the Lua kernel): th's completion and Ctrl-C
}
# The public face: the package init (what `import luabridge` gives), the public modules beside
# it (luabridge.nn, .optim, .cuda), `python -m luabridge` and `python -m luabridge.kernel` (the
# Jupyter kernel's documented name). They stand above every layer.
FACE = {"luabridge", "luabridge.nn", "luabridge.optim", "luabridge.cuda", "luabridge.__main__", "luabridge.kernel"}
# Tools beside the package: lua52 builds the LuaJIT extension (setup.py loads it by path); it
# may read the runtime, nothing else.
TOOLS = {"luabridge.lua52": {"luabridge.core.runtime"}}
# Compiled modules of the package (no .py source): luabridge._luajit21, lupa's module over
# LuaJIT with LUA52COMPAT, built by setup.py; core/runtime.py picks it (or lupa's).
EXTENSIONS = {"luabridge._luajit21"}

# Inside core/: modules whose own imports are leaves only, so every module may use them:
# errors (LuaError and its messages), paths (where the Lua tree is: read while the runtime
# itself is being imported), version, lua_table (the reader of the Lua table files both languages
# share, no Lua run), dtypes (the element-type table, read from lua/ with lua_table).
LEAVES = {"luabridge.core.errors", "luabridge.core.paths", "luabridge.core.version", "luabridge.core.lua_table",
          "luabridge.core.dtypes", "luabridge.core"}

# The bottom of core/ and what each may import besides the leaves: memory (the buffers lent to
# Lua), runtime (one Lua runtime per thread; the providers register their callbacks with it at
# start-up), interop (numpy / DLPack <-> Lua tensors: it takes Lua tensors and arrays only),
# proxy (Lua objects as Python objects; it unwraps proxies before calling interop).
BELOW = {
    "luabridge.core.memory": set(),
    "luabridge.core.runtime": {"luabridge.core.memory", "luabridge._luajit21"},
    "luabridge.core.interop": {"luabridge.core.runtime", "luabridge.core.memory"},
    "luabridge.core.proxy": {"luabridge.core.interop", "luabridge.core.runtime", "luabridge.core.memory"},
}

# The one module that imports lupa (and the extension that stands in for it).
LUPA_IMPORTER = "luabridge.core.runtime"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


@dataclass(frozen=True)
class Import:
    source: str      # the importing module
    target: str      # the imported luabridge module
    line: int
    type_only: bool  # under `if TYPE_CHECKING:`

    def __str__(self) -> str:
        where = MODULES[self.source].relative_to(ROOT.parent) if self.source in MODULES else self.source
        return f"{self.source} -> {self.target} ({where}:{self.line})"


@dataclass(frozen=True)
class Name:
    """A name taken by `from origin import name`."""
    source: str
    origin: str      # the module (or package) it comes from
    name: str
    line: int


def _existing(name: str) -> str:
    """The longest prefix of a dotted name that is a module of the package (or an extension)."""
    while name not in MODULES and name not in EXTENSIONS:
        name = name.rpartition(".")[0]
    return name


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
           (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


class _Imports(ast.NodeVisitor):
    def __init__(self, module: str, is_package: bool) -> None:
        self.module = module
        self.package = module if is_package else module.rpartition(".")[0]
        self.found: list[Import] = []
        self.names: list[Name] = []
        self.external: list[tuple[str, int]] = []      # top-level names of other packages
        self.dynamic: list[tuple[int, ast.expr]] = []   # import_module of a computed name
        self.type_only = False

    def _add(self, target: str, line: int) -> None:
        if target == "luabridge" or target.startswith("luabridge."):
            self.found.append(Import(self.module, _existing(target), line, self.type_only))
        else:
            self.external.append((target.partition(".")[0], line))

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):
            self.type_only, outer = True, self.type_only
            for stmt in node.body:
                self.visit(stmt)
            self.type_only = outer
            for stmt in node.orelse:
                self.visit(stmt)
        else:
            self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, node.lineno)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            base = self.package.split(".")[: len(self.package.split(".")) - node.level + 1]
            origin = ".".join(base + ([node.module] if node.module else []))
        else:
            origin = node.module or ""
        for alias in node.names:
            sub = f"{origin}.{alias.name}"
            if sub in MODULES or sub in EXTENSIONS:
                self._add(sub, node.lineno)
            else:
                self._add(origin, node.lineno)
                if origin.startswith("luabridge"):
                    self.names.append(Name(self.module, _existing(origin), alias.name, node.lineno))

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if name in ("import_module", "__import__") and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and not arg.value.startswith("."):
                self._add(arg.value, node.lineno)
            else:
                self.dynamic.append((node.lineno, arg))
        self.generic_visit(node)


def _parse(module: str, source: str | None = None, is_package: bool | None = None) -> _Imports:
    """The imports of a module of the package, or of `source` read as if it were that module."""
    if is_package is None:
        is_package = module in MODULES and MODULES[module].name == "__init__.py"
    visitor = _Imports(module, is_package)
    text = MODULES[module].read_text() if source is None else source
    visitor.visit(ast.parse(text, str(MODULES.get(module, module))))
    return visitor


# The modules that import computed names (importlib.import_module(f"...")), and what they load:
# the package's lazy attributes luabridge.nn, luabridge.optim, luabridge.t7.
COMPUTED = {"luabridge": {"luabridge.nn", "luabridge.optim", "luabridge.t7"}}

PARSED = {m: _parse(m) for m in MODULES}
IMPORTS = sorted({i for v in PARSED.values() for i in v.found}
                 | {Import(m, target, line, False) for m, targets in COMPUTED.items() if m in PARSED
                    for line, _ in PARSED[m].dynamic for target in targets}, key=str)
NAMES = [n for v in PARSED.values() for n in v.names]


def _imports_of(module: str) -> list[Import]:
    return [i for i in IMPORTS if i.source == module and i.target != module]


def _layer(module: str) -> str | None:
    """The package of RANKS holding module, or None (the face, a tool, an extension)."""
    for package in RANKS:
        if module == package or module.startswith(package + "."):
            return package
    return None


# ---- the checkers: each takes what the reader found and returns the violations ----

def rank_violations(imports: list[Import]) -> list[str]:
    """Imports against the ranks, the face and providers rules, and core's inner order."""
    bad = []
    for i in imports:
        if i.target == i.source:
            continue
        src, dst = _layer(i.source), _layer(i.target)
        if i.target in FACE and i.source not in FACE:
            bad.append(f"{i}: only the face imports the face")
        elif dst == "luabridge.providers" and src != dst and i.source not in FACE:
            bad.append(f"{i}: only luabridge/__init__.py (the start-up) and the face import providers/")
        elif i.source in TOOLS:
            if i.target not in TOOLS[i.source]:
                bad.append(f"{i}: {i.source} may import only {sorted(TOOLS[i.source])}")
        elif src is not None and dst is None and i.target not in EXTENSIONS:
            bad.append(f"{i}: a layer imports a module outside the layers")
        elif src is not None and dst is not None and src != dst and RANKS[dst] >= RANKS[src]:
            bad.append(f"{i}: {src} (rank {RANKS[src]}) may not import {dst} (rank {RANKS[dst]})")
        elif src == dst == "luabridge.core":
            allowed = LEAVES if i.source in LEAVES else BELOW.get(i.source, set(BELOW) | LEAVES) | LEAVES
            if i.target not in allowed and i.source != "luabridge.core":
                bad.append(f"{i}: inside core/, {i.source} may import only {sorted(allowed)}")
    return bad


def private_violations(names: list[Name], imports: list[Import]) -> list[str]:
    """A private name taken from another module, or a private module (`_x`) imported from
    outside the package holding it. The compiled extension is core/runtime's to pick."""
    bad = [f"{n.source} takes {n.name} from {n.origin} (line {n.line})" for n in names
           if n.name.startswith("_") and not n.name.startswith("__") and n.origin != n.source]
    for i in imports:
        parts = i.target.split(".")
        for k, part in enumerate(parts):
            if part.startswith("_") and not part.startswith("__"):
                home = ".".join(parts[:k])
                if not (i.source == home or i.source.startswith(home + ".")) and \
                        not (i.target in EXTENSIONS and i.source == LUPA_IMPORTER):
                    bad.append(f"{i}: the private module {'.'.join(parts[:k + 1])} belongs to {home}")
                break
    return bad


def lupa_violations(external: dict[str, list[tuple[str, int]]], imports: list[Import]) -> list[str]:
    bad = [f"{m} imports lupa (line {line}): take luajit21 from core/runtime.py" for m, found in external.items()
           for name, line in found if name == "lupa" and m != LUPA_IMPORTER]
    bad += [f"{i}: only {LUPA_IMPORTER} imports the LuaJIT extension" for i in imports
            if i.target in EXTENSIONS and i.source != LUPA_IMPORTER]
    return bad


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(set(edges) | {w for ws in edges.values() for w in ws}):
        if v not in index:
            visit(v)
    return found


def cycle_violations(imports: list[Import]) -> list[str]:
    edges: dict[str, set[str]] = {}
    for i in imports:
        if i.target != i.source:
            edges.setdefault(i.source, set()).add(i.target)
    return ["  " + " <-> ".join(c) + ":\n" + "\n".join(
        f"    {i}{' (TYPE_CHECKING)' if i.type_only else ''}" for i in imports if i.source in c and i.target in c)
        for c in _cycles(edges)]


# ---- the rules on the source ----

def test_the_import_reader_sees_imports_inside_functions_and_relative_ones() -> None:
    """The reader itself, on a known edge: graph/__init__'s lazy `from .session import Session`
    inside __getattr__ is a relative import inside a function."""
    assert any(i.source == "luabridge.graph" and i.target == "luabridge.graph.session" for i in IMPORTS)
    assert len(MODULES) > 40 and len(IMPORTS) > 100


def test_every_module_has_a_place() -> None:
    """Each module is in a ranked package, the face, a tool; nothing else sits at the root."""
    loose = sorted(m for m in MODULES if _layer(m) is None and m not in FACE and m not in TOOLS)
    assert not loose, f"modules outside the layers (move them into a package of RANKS): {loose}"


def test_imports_follow_the_ranks() -> None:
    bad = rank_violations(IMPORTS)
    assert not bad, "imports against the layers:\n" + "\n".join(bad)


def test_no_private_names_cross_modules() -> None:
    bad = private_violations(NAMES, IMPORTS)
    assert not bad, "private names taken from other modules (make them public or keep them home):\n" + "\n".join(bad)


def test_no_import_cycles() -> None:
    bad = cycle_violations(IMPORTS)
    assert not bad, "import cycles (TYPE_CHECKING imports included):\n" + "\n".join(bad)


def test_only_the_runtime_imports_lupa() -> None:
    bad = lupa_violations({m: v.external for m, v in PARSED.items()}, IMPORTS)
    assert not bad, "\n".join(bad)


# t7/'s pure-Python half: the package face, the format spec, its values, reader and writer
# (t7.load is the Lua-backed load).
T7_PURE = {"luabridge.t7", "luabridge.t7.format", "luabridge.t7.values", "luabridge.t7.reader", "luabridge.t7.writer"}


def test_t7_runs_no_lua_and_knows_no_graph() -> None:
    """t7's reader and writer are pure Python: they import leaves and each other only (not
    t7.load, the runtime or graph/); every module of t7/ is one of them or t7.load."""
    bad = [str(i) for m in T7_PURE for i in _imports_of(m) if i.target not in LEAVES | T7_PURE]
    assert not bad, "\n".join(bad)
    assert {m for m in MODULES if m.startswith("luabridge.t7")} == T7_PURE | {"luabridge.t7.load"}


def test_passes_never_import_the_executor() -> None:
    runners = ("luabridge.graph.executor", "luabridge.graph.session")
    bad = [str(i) for i in IMPORTS if i.source.startswith("luabridge.graph.passes") and i.target in runners]
    assert not bad, "\n".join(bad)


def test_computed_imports_are_listed_with_their_targets() -> None:
    """import_module of a computed name cannot be read from the source: each module doing it
    is listed in COMPUTED with what it can load, so that the rules and the cycle check see it."""
    dynamic = {m for m, v in PARSED.items() if v.dynamic}
    assert dynamic == set(COMPUTED), (
        "modules importing computed names must be listed in COMPUTED with their targets: "
        f"unlisted {sorted(dynamic - set(COMPUTED))}, listed but gone {sorted(set(COMPUTED) - dynamic)}")


# ---- each rule catches a violation made up for it ----

def _found(module: str, source: str) -> _Imports:
    """What the reader finds in `source` read as module `module` (a module that exists, so its
    package and rank are the real ones)."""
    return _parse(module, source)


@pytest.mark.parametrize("module, source", [
    ("luabridge.graph.executor", "from ..providers.torch_cuda import fuse"),          # graph -> providers
    ("luabridge.model.handle", "def f():\n    from ..graph import executor"),           # up a rank, in a function
    ("luabridge.core.interop", "from .proxy import wrap"),                              # core's inner order
    ("luabridge.torch.module", "from .. import eval as lua_eval"),                      # the face
    ("luabridge.providers.gnuplot", "if TYPE_CHECKING:\n    from ..t7 import reader"),  # up, type-only
    ("luabridge.ray.fit", "from ..torch import convert"),                               # front end -> front end
    ("luabridge.lua52", "from .graph import api"),                                      # a tool beyond its list
])
def test_the_rank_rule_catches_a_forbidden_import(module: str, source: str) -> None:
    assert rank_violations(_found(module, source).found)


def test_the_rank_rule_lets_allowed_imports_pass() -> None:
    ok = [_found("luabridge.graph.executor", "from ..core.runtime import bridge\nfrom .symbol import Node"),
          _found("luabridge", "from . import providers\nfrom .core.proxy import wrap"),
          _found("luabridge.providers.torch_cuda.fuse", "from . import arrays\nfrom ...core.dtypes import DTYPES")]
    assert not [v for f in ok for v in rank_violations(f.found)]


def test_the_private_rule_catches_a_private_name_and_module() -> None:
    name = _found("luabridge.torch.crossing", "from ..core.interop import _helper")
    assert private_violations(name.names, name.found)
    module = _found("luabridge.graph.api", "from ..tinyflow import _ops")
    assert private_violations(module.names, module.found)
    home = _found("luabridge.tinyflow.nn", "from ._ops import sqrt")
    assert not private_violations(home.names, home.found)


def test_the_cycle_rule_catches_a_type_checking_circle() -> None:
    circle = IMPORTS + [Import("luabridge.core.memory", "luabridge.core.proxy", 1, True)]
    assert any("TYPE_CHECKING" in c for c in cycle_violations(circle))
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_lupa_rule_catches_a_direct_import() -> None:
    found = _found("luabridge.torch.convert", "from lupa import luajit21 as lupa")
    assert lupa_violations({"luabridge.torch.convert": found.external}, found.found)
    ext = _found("luabridge.core.proxy", "from .. import _luajit21")
    assert lupa_violations({}, ext.found)


# ---- Lua sources and per-runtime caches ----

# A line of Lua source: a local, a function header, an end, a block opener ending its line.
LUA_LINE = re.compile(r"^\s*(local\s+(function\s+)?[A-Za-z_]\w*|end\b|function\b\s*[\w.:]*\s*\(|"
                      r"(if|elseif)\b.*\bthen\s*$|(for|while)\b.*\bdo\s*$)")
RUNS_LUA = {"execute", "eval", "load", "loadstring"}


def _docstrings(tree: ast.AST) -> set[int]:
    kinds = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, kinds) and n.body and isinstance(n.body[0], ast.Expr)
            and isinstance(n.body[0].value, ast.Constant)}


def _lua_in_strings(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    docs = _docstrings(tree)
    where = path.relative_to(ROOT.parent)
    found = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs and "\n" in n.value:
            if any(LUA_LINE.match(line) for line in n.value.splitlines()):
                found.append(f"{where}:{n.lineno}: {n.value.strip()[:60]!r}")
        if isinstance(n, ast.Call) and n.args and isinstance(n.func, (ast.Attribute, ast.Name)):
            name = n.func.attr if isinstance(n.func, ast.Attribute) else n.func.id
            arg = n.args[0]
            if name in RUNS_LUA and isinstance(arg, ast.Constant) and "\n" in str(arg.value):
                found.append(f"{where}:{n.lineno}: {name} of a multi-line string")
    return found


def test_lua_sources_are_lua_files_not_python_strings() -> None:
    """Lua kept in Python strings moves to lua/luabridge/ (loaded with require): a string in
    luabridge/ may hold one line of Lua (an expression, a one-line chunk), no more."""
    found = [f for p in MODULES.values() for f in _lua_in_strings(p)]
    assert not found, "multi-line Lua in Python strings:\n" + "\n".join(found)


def test_the_lua_string_check_sees_lua() -> None:
    assert LUA_LINE.match("  local m = nn.Linear(2, 3)") and LUA_LINE.match("end")
    assert LUA_LINE.match("function M.build(spec)") and LUA_LINE.match("  for i = 1, n do")
    assert not LUA_LINE.match("  --version          print the versions of luabridge and LuaJIT")


RUNTIME_NAMES = {"bridge", "runtime", "b", "lua"}


def test_per_runtime_caches_live_on_the_runtime() -> None:
    """No cache keyed by id() of a runtime (the id of a collected runtime is reused by the next
    one, which would then find the old one's Lua values): such state is an attribute of the
    thread's Bridge (runtime.py)."""
    found = []
    for path in MODULES.values():
        for n in ast.walk(ast.parse(path.read_text())):
            if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "id" and n.args:
                arg = n.args[0]
                name = getattr(arg.func, "id", None) if isinstance(arg, ast.Call) else getattr(arg, "id", None)
                if name in RUNTIME_NAMES:
                    found.append(f"{path.relative_to(ROOT.parent)}:{n.lineno}")
    assert not found, "caches keyed by a runtime:\n" + "\n".join(found)


# ---- Python and Lua halves at mirrored paths; the declared callbacks (py) ----

LUA_HALVES = REPO / "lua" / "luabridge"
# Lua halves with no Python module of their own name, each with the module it belongs to.
UNPAIRED = {
    "th/trepl.lua": "luabridge/th/repl.py: the globals th gives every script (preloaded by the repl and `luabridge run`)",
}


def pairing_violations(lua_files: list[str], modules: set[str]) -> list[str]:
    """lua/luabridge/P.lua (P/init.lua) without luabridge/P.py or the package luabridge/P/."""
    bad = []
    for rel in lua_files:
        stem = rel[:-len(".lua")]
        if stem.endswith("/init"):
            stem = stem[:-len("/init")]
        if rel in UNPAIRED:
            continue
        name = "luabridge." + stem.replace("/", ".")
        if name not in modules:
            bad.append(f"lua/luabridge/{rel}: no Python half luabridge/{stem}.py (or package luabridge/{stem}/)")
    return bad


def _lua_halves() -> list[str]:
    return sorted(str(p.relative_to(LUA_HALVES)) for p in LUA_HALVES.rglob("*.lua"))


def test_lua_halves_mirror_their_python_halves() -> None:
    bad = pairing_violations(_lua_halves(), set(MODULES))
    assert not bad, "\n".join(bad)
    gone = [k for k in UNPAIRED if not (LUA_HALVES / k).is_file()]
    assert not gone, f"UNPAIRED lists Lua files that are gone: {gone}"


def test_the_pairing_rule_catches_a_lonely_lua_file() -> None:
    assert pairing_violations(["closures.lua"], set(MODULES))
    assert pairing_violations(["graph/kernels.lua"], set(MODULES))
    assert not pairing_violations(["graph/ops.lua", "graph/ops/nn.lua", "core/runtime.lua"], set(MODULES))


# `py.<name>` in Lua: the callbacks table (`local py = rawget(_G, '__luabridge_py')`, or
# torch.core.memory's `memory.py`) read by a name.
LUA_CALLBACK = re.compile(r"(?<![\w.])(?:memory\.)?py\.([A-Za-z_]\w*)|__luabridge_py'?\)?\.([A-Za-z_]\w*)")


def _declared() -> dict[str, str]:
    tree = ast.parse((ROOT / "providers" / "callbacks.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", None) == "CALLBACKS":
            return ast.literal_eval(node.value)
    raise AssertionError("providers/callbacks.py declares no CALLBACKS")


def callback_violations(lua_sources: dict[str, str], declared: dict[str, str]) -> list[str]:
    bad = []
    for where, text in lua_sources.items():
        for n, line in enumerate(text.splitlines(), 1):
            code = line.split("--", 1)[0]
            for m in LUA_CALLBACK.finditer(code):
                name = m.group(1) or m.group(2)
                if name not in declared:
                    bad.append(f"{where}:{n}: py.{name} is not declared in luabridge/providers/callbacks.py")
    return bad


def _lua_sources() -> dict[str, str]:
    return {str(p.relative_to(REPO)): p.read_text(errors="replace") for p in sorted((REPO / "lua").rglob("*.lua"))
            if "__luabridge_py" in p.read_text(errors="replace") or "memory.py." in p.read_text(errors="replace")}


def test_every_callback_lua_calls_is_declared() -> None:
    sources = _lua_sources()
    assert len(sources) > 15
    bad = callback_violations(sources, _declared())
    assert not bad, "\n".join(bad)


def test_the_callback_rule_catches_an_undeclared_name() -> None:
    src = {"x.lua": "local py = rawget(_G, '__luabridge_py')\nlocal a = py.alloc(8)\nreturn py.made_up(1)"}
    assert callback_violations(src, _declared()) == [
        "x.lua:3: py.made_up is not declared in luabridge/providers/callbacks.py"]
    assert callback_violations({"y.lua": "rawget(_G, '__luabridge_py').nope()"}, _declared())


def test_the_declared_table_is_what_the_providers_give() -> None:
    """Every declared callback is given by a provider and every given one is declared: the
    runtime's own and those of the providers registered at start-up."""
    import luabridge  # noqa: F401  (the start-up: registers the providers)
    from luabridge.core import runtime
    from luabridge.providers.callbacks import CALLBACKS

    b = runtime.bridge()
    given = {"is_interrupt"} | {name for provider in runtime._callback_providers for name in provider(b)}
    assert given == set(CALLBACKS), (f"declared, not given: {sorted(set(CALLBACKS) - given)}; "
                                     f"given, not declared: {sorted(given - set(CALLBACKS))}")
    assert all(isinstance(v, str) and v for v in CALLBACKS.values())


def test_the_lua_boot_names_a_missing_callback() -> None:
    """core/runtime.lua (the boot) stops with the name of a declared callback no provider gave."""
    from luabridge.core.paths import lua_dir
    from luabridge.core.runtime import luajit21

    lua = luajit21.LuaRuntime()
    boot = lua.globals().loadfile(str(lua_dir() / "luabridge" / "core" / "runtime.lua"))
    ok, message = lua.eval("pcall")(boot, lua.table_from({"alloc": 1}), lua.table_from(["alloc", "release"]),
                                    str(lua_dir()), str(lua_dir()))
    assert ok is False and "'release'" in message and "declared" in message


def test_a_runtime_refuses_an_undeclared_callback(monkeypatch: pytest.MonkeyPatch) -> None:
    import luabridge  # noqa: F401
    from luabridge.core import runtime

    monkeypatch.setattr(runtime, "_callback_providers", [*runtime._callback_providers,
                                                         lambda b: {"not_declared_anywhere": print}])
    with pytest.raises(RuntimeError, match="not_declared_anywhere"):
        runtime.Bridge()


# ==============================================================================================
# Lua: the layers of lua/ (DESIGN.md, "Rules"; lua/torch/README.md, "Layout")
#
# Every `require` of a string literal is read from the source (require 'x', require "x",
# require('x'), require [[x]]; at any depth: inside functions too), comments and other strings
# skipped by a small Lua lexer; a require of a module of one of our packages that no file
# provides is an error too. A module name resolves to its file as package.path does (a/b.lua or
# a/b/init.lua under lua/); names of no package of ours (ffi, bit, lfs, ...) are not checked.
# Packages are the top-level folders (and files) of lua/, with torch.backend.cpu and
# torch.backend.cuda counted apart from torch: the devices. The op table loads the devices'
# init.lua by name from a table (torch.backend.load), not by a literal require.

LUA = REPO / "lua"
DEVICES = ("torch.backend.cpu", "torch.backend.cuda")
TENSOR_FIELDS = ("_st", "_off", "_sz", "_str", "_dt")


def _lua_tokens(src: str):
    """(kind, text, line) of a Lua chunk: kind 'name', 'string' (the value) or 'op'; comments dropped."""
    i, n, line = 0, len(src), 1
    while i < n:
        c = src[i]
        if c == "\n":
            line += 1
            i += 1
        elif c in " \t\r":
            i += 1
        elif src.startswith("--", i):
            m = re.match(r"--\[(=*)\[", src[i:])
            if m:
                end = src.find("]" + m.group(1) + "]", i)
                end = n if end < 0 else end + len(m.group(1)) + 2
            else:
                end = src.find("\n", i)
                end = n if end < 0 else end
            line += src.count("\n", i, end)
            i = end
        elif c in "'\"":
            j, out = i + 1, []
            while j < n and src[j] != c:
                if src[j] == "\\":
                    out.append(src[j:j + 2])
                    j += 2
                else:
                    out.append(src[j])
                    j += 1
            yield "string", "".join(out), line
            line += src.count("\n", i, j)
            i = j + 1
        elif c == "[" and re.match(r"\[=*\[", src[i:]):
            level = re.match(r"\[(=*)\[", src[i:]).group(1)
            start = i + len(level) + 2
            end = src.find("]" + level + "]", start)
            end = n if end < 0 else end
            yield "string", src[start:end].lstrip("\n"), line
            line += src.count("\n", i, end)
            i = end + len(level) + 2
        elif c.isalpha() or c == "_":
            m = re.match(r"[A-Za-z_][A-Za-z0-9_]*", src[i:])
            yield "name", m.group(0), line
            i += len(m.group(0))
        elif c.isdigit():
            m = re.match(r"0[xX][0-9a-fA-F.pP+-]+|[0-9.]+(?:[eE][+-]?[0-9]+)?", src[i:])
            i += len(m.group(0))
        else:
            yield "op", c, line
            i += 1


@dataclass(frozen=True)
class LuaRequire:
    path: str      # the requiring file, relative to lua/
    line: int
    target: str    # the required module name


@dataclass(frozen=True)
class LuaFieldRead:
    path: str
    line: int
    field: str


@functools.lru_cache(maxsize=None)
def _lua_scan(path: str, src: str) -> tuple[list[LuaRequire], list[LuaFieldRead]]:
    """The literal requires and the tensor-field reads (x._sz, x['_sz']) of one Lua file."""
    toks = list(_lua_tokens(src))
    requires, fields = [], []
    for k, (kind, text, line) in enumerate(toks):
        if kind == "name" and text == "require" and (k == 0 or toks[k - 1][1] not in (".", ":")):
            rest = toks[k + 1:k + 4]
            if rest and rest[0][0] == "string":
                requires.append(LuaRequire(path, line, rest[0][1]))
            elif len(rest) >= 3 and rest[0][1] == "(" and rest[1][0] == "string" and rest[2][1] == ")":
                requires.append(LuaRequire(path, line, rest[1][1]))
        elif kind == "name" and text in TENSOR_FIELDS and k > 0 and toks[k - 1][1] == "." \
                and not (k > 1 and toks[k - 2][1] == "."):   # x._sz, not the concatenation .. _sz
            fields.append(LuaFieldRead(path, line, text))
        elif kind == "string" and text in TENSOR_FIELDS and k > 0 and toks[k - 1][1] == "[":
            fields.append(LuaFieldRead(path, line, text))
    return requires, fields


@functools.lru_cache(maxsize=None)
def _lua_files() -> tuple[tuple[str, str], ...]:
    return tuple((p.relative_to(LUA).as_posix(), p.read_text(errors="replace")) for p in sorted(LUA.rglob("*.lua")))


def lua_tree() -> dict[str, str]:
    """Every Lua file of lua/: path (relative, with '/') -> source; a fresh dict to change."""
    return dict(_lua_files())


def lua_module_file(name: str, files) -> str | None:
    """The file under lua/ that require(name) loads, as package.path's ?.lua;?/init.lua."""
    base = name.replace(".", "/")
    for cand in (base + ".lua", base + "/init.lua"):
        if cand in files:
            return cand
    return None


def lua_module_of(path: str) -> str:
    mod = path[:-len(".lua")].replace("/", ".")
    return mod[:-len(".init")] if mod.endswith(".init") else mod


def lua_package(module: str) -> str:
    for device in DEVICES:
        if module == device or module.startswith(device + "."):
            return device
    return module.split(".")[0]


def _in_device(path: str) -> str | None:
    for device in DEVICES:
        if path.startswith(device.replace(".", "/") + "/"):
            return device
    return None


def lua_layer_violations(files: dict[str, str]) -> list[str]:
    """Every break of the Lua rules in `files` (path under lua/ -> source)."""
    bad = []
    edges: dict[str, dict[str, str]] = {}
    packages = {lua_package(lua_module_of(p)) for p in files}
    for path, src in files.items():
        requires, fields = _lua_scan(path, src)
        device = _in_device(path)
        for r in requires:
            target_file = lua_module_file(r.target, files)
            if target_file is None:
                if lua_package(r.target) in packages:
                    bad.append(f"lua/{path}:{r.line}: requires {r.target}, no module under lua/")
                continue   # not ours (ffi, bit, a C library's binding)
            target_pkg = lua_package(r.target)
            # below the front end only through the op table (torch.backend) and torch.core: a
            # device's modules are required only from that device's folder (the op table loads
            # the device inits by name, from a table: backend.load)
            if target_pkg in DEVICES and device != target_pkg:
                bad.append(f"lua/{path}:{r.line}: requires {r.target} (a device's module) outside "
                           f"lua/{target_pkg.replace('.', '/')}/: go through the op table (torch.backend)")
            source_pkg = lua_package(lua_module_of(path))
            if source_pkg != target_pkg:
                edges.setdefault(source_pkg, {}).setdefault(target_pkg, f"lua/{path}:{r.line} requires {r.target}")
        if not path.startswith("torch/"):
            for f in fields:
                bad.append(f"lua/{path}:{f.line}: reads the tensor field {f.field} outside lua/torch/ "
                           "(use tensor methods or torch.core)")
    for component in _cycles({a: set(bs) for a, bs in edges.items()}):   # the Python rules' Tarjan
        cycle = _lua_cycle_through(component[0], set(component), edges)
        steps = [edges[a][b] for a, b in zip(cycle, cycle[1:] + cycle[:1])]
        bad.append("package circle " + " -> ".join(cycle + cycle[:1]) + ": " + "; ".join(steps))
    return bad


def _lua_cycle_through(start: str, comp: set[str], edges) -> list[str]:
    """A cycle through start inside comp (breadth first back to start)."""
    prev = {start: None}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(edges.get(v, {})):
            if w == start:
                path = [v]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                return path[::-1]
            if w in comp and w not in prev:
                prev[w] = v
                queue.append(w)
    return [start]


def lua_torch_circles(files: dict[str, str]) -> list[str]:
    """Module circles inside lua/torch/ (the tensor library, the op table, the devices): none, so
    that each file there has a place below the ones that require it (blas.lua calls dnnl.lua,
    never the other way round)."""
    edges: dict[str, set[str]] = {}
    for path, src in files.items():
        if not path.startswith("torch/"):
            continue
        for r in _lua_scan(path, src)[0]:
            target = lua_module_file(r.target, files)
            if target and target != path and target.startswith("torch/"):
                edges.setdefault(lua_module_of(path), set()).add(lua_module_of(target))
    return ["module circle in lua/torch/: " + " <-> ".join(c) for c in _cycles(edges)]


def lua_family_violations(files: dict[str, str]) -> list[str]:
    """backend.families: one file of each name in both device folders, loaded by both inits."""
    init = files.get("torch/backend/init.lua", "")
    m = re.search(r"backend\.families\s*=\s*\{([^}]*)\}", init)
    if not m:
        return ["lua/torch/backend/init.lua: no backend.families list"]
    families = [t for kind, t, _ in _lua_tokens(m.group(1)) if kind == "string"]
    bad = []
    for device in DEVICES:
        folder = device.replace(".", "/")
        for f in families:
            if f"{folder}/{f}.lua" not in files:
                bad.append(f"lua/{folder}/{f}.lua missing: every device has every family (torch.backend.families)")
        dinit = files.get(f"{folder}/init.lua", "")
        if not re.search(r"for\s+_\s*,\s*(\w+)\s+in\s+ipairs\s*\(.*?\.families\s*\)\s*do\s+require\s*\(\s*['\"]"
                         + re.escape(device) + r"\.['\"]\s*\.\.\s*\1\s*\)", dinit):
            bad.append(f"lua/{folder}/init.lua does not load its families from torch.backend.families")
    return bad


def test_lua_layers():
    """Outside lua/torch/backend/<device>/ no device module is required (the op table, torch.backend,
    and torch.core are the way below the front end); tensor fields are read under lua/torch/ only;
    no circle between packages (the devices counted apart)."""
    assert lua_layer_violations(lua_tree()) == []


def test_no_module_circles_in_lua_torch():
    assert lua_torch_circles(lua_tree()) == []


def test_the_lua_torch_circle_rule_catches_one():
    files = lua_tree()
    files["torch/backend/cpu/dnnl.lua"] += "\nlocal blas = require 'torch.backend.cpu.blas'\n"
    assert any("torch.backend.cpu.blas <-> torch.backend.cpu.dnnl" in v for v in lua_torch_circles(files))


def test_lua_device_families():
    """backend/cpu/ and backend/cuda/ have a file for every family of torch.backend.families, and
    each device's init.lua loads them from that one list."""
    assert lua_family_violations(lua_tree()) == []


def test_lua_both_devices_load_every_family():
    import luabridge
    missing = luabridge.eval("""(function()
      require 'torch'
      local backend, out = require 'torch.backend', {}
      for _, family in ipairs(backend.families) do
        for _, device in ipairs { 'cpu', 'cuda' } do
          if not package.loaded['torch.backend.' .. device .. '.' .. family] then out[#out + 1] = device .. '.' .. family end
        end
      end
      return table.concat(out, ' ')
    end)()""")
    assert missing == ""


@pytest.mark.parametrize("path, source, caught", [
    ("nn/Fake.lua", "local blas = require 'torch.backend.cpu.blas'", "a device's module"),
    ("nn/util/fake.lua", "local C = require('torch.backend.cuda.core')", "a device's module"),
    ("torch/math/fake.lua", 'require "torch.backend.cpu.pointwise"', "a device's module"),
    ("luabridge/fake.lua", "local f = function() return require [[torch.backend.cpu.ufunc]] end", "a device's module"),
    ("torch/backend/cuda/fake.lua", "require 'torch.backend.cpu.apply'", "a device's module"),
    ("torch/backend/fake.lua", "require 'torch.backend.cuda.core'", "a device's module"),
    ("nn/Fake.lua", "return function(t) return t._sz[1] end", "tensor field _sz"),
    ("dpnn/Fake.lua", "return function(t) return t['_st'] end", "tensor field _st"),
    ("nn/util/fake.lua", "return function(t) return t._dt.size * 2 end", "tensor field _dt"),
    ("torch/fake.lua", "require 'nn.Module'", "package circle nn -> torch -> nn"),
    ("nn/util/fake.lua", "require 'cunn'", "package circle cunn -> nn -> cunn"),
    ("nn/Fake.lua", "require 'nn.kernels.conv'", "no module under lua/"),
])
def test_lua_rules_catch_a_forbidden_require(path, source, caught):
    files = lua_tree()
    files[path] = source
    found = lua_layer_violations(files)
    assert any(caught in v for v in found), found


@pytest.mark.parametrize("path, source", [
    ("nn/Fake.lua", "-- require 'torch.backend.cpu.blas'\nlocal s = \"require 'torch.backend.cpu.blas'\""),
    ("nn/Fake.lua", "--[[ t._sz ]] local name = '_sz' .. x, y .._st"),
    ("torch/fake.lua", "return function(t) return t._sz[1], require('torch.core.apply') end"),
    ("torch/backend/cpu/fake.lua", "require 'torch.backend.cpu.blas'"),
    ("nn/Fake.lua", "local cpu = require('torch.backend').cpu; local dtype = require 'torch.core.dtype'"),
])
def test_lua_rules_allow(path, source):
    files = lua_tree()
    before = lua_layer_violations(files)
    files[path] = source
    assert lua_layer_violations(files) == before


def test_lua_families_caught():
    files = lua_tree()
    del files["torch/backend/cuda/lapack.lua"]
    assert any("cuda/lapack.lua missing" in v for v in lua_family_violations(files))
    files = lua_tree()
    files["torch/backend/cpu/init.lua"] = "require 'torch.backend.cpu.pointwise'\nrequire 'torch.backend.cpu.reduce'"
    assert any("cpu/init.lua does not load" in v for v in lua_family_violations(files))


# ---- the front end never names a device ----
#
# Outside lua/torch/backend/ no Lua file reaches a device's op table by name: not
# `backend.cpu` / `backend.cuda` (through any local bound to require 'torch.backend', or
# require('torch.backend').cpu), nor `backend['cpu']`, nor registers ops on a device by name
# (`backend.register('cpu', ...)`, `backend.lacks`); code generated from strings counts too.
# Every pass goes through the op table of its tensor's device, `backend.of(t).<op>(...)`;
# host-wide services that no tensor picks (the generators' streams, the BLAS threads, numpy's
# loops over host memory) are `backend.host`.

DEVICE_NAMES = ("cpu", "cuda")
_NAMED_IN_STRING = re.compile(r"\bbackend\s*\.\s*(cpu|cuda)\b|torch\.backend['\"]\s*\)\s*\.\s*(cpu|cuda)\b"
                              r"|\bbackend\s*\[\s*['\"](cpu|cuda)['\"]\s*\]")


def _backend_aliases(toks) -> set[str]:
    """The locals bound to require 'torch.backend' (and `backend`, the usual name)."""
    names = {"backend"}
    for k, (kind, text, _) in enumerate(toks):
        if kind == "name" and text == "require" and k >= 2 and toks[k - 1][1] == "=" and toks[k - 2][0] == "name":
            rest = toks[k + 1:k + 4]
            target = rest[0][1] if rest and rest[0][0] == "string" else \
                rest[1][1] if len(rest) >= 3 and rest[0][1] == "(" and rest[2][1] == ")" else None
            after = toks[k + (2 if rest and rest[0][0] == "string" else 4)] if len(toks) > k + 4 else None
            if target == "torch.backend" and not (after and after[1] in (".", "[", ":")):
                names.add(toks[k - 2][1])
    return names


def lua_device_name_violations(files: dict[str, str]) -> list[str]:
    bad = []
    for path, src in files.items():
        if path.startswith("torch/backend/"):
            continue
        toks = list(_lua_tokens(src))
        aliases = _backend_aliases(toks)
        for k, (kind, text, line) in enumerate(toks):
            nxt = toks[k + 1:k + 4]
            named = None
            if kind == "name" and text in aliases and (k == 0 or toks[k - 1][1] != "."):
                if len(nxt) >= 2 and nxt[0][1] == "." and nxt[1][0] == "name" and nxt[1][1] in DEVICE_NAMES:
                    named = f"{text}.{nxt[1][1]}"
                elif len(nxt) >= 2 and nxt[0][1] == "[" and nxt[1][0] == "string" and nxt[1][1] in DEVICE_NAMES:
                    named = f"{text}['{nxt[1][1]}']"
            elif kind == "string" and text == "torch.backend" and len(nxt) >= 3 and nxt[0][1] == ")" \
                    and nxt[1][1] == "." and nxt[2][1] in DEVICE_NAMES:
                named = f"require('torch.backend').{nxt[2][1]}"
            elif kind == "name" and text in ("register", "lacks") and k > 0 and toks[k - 1][1] == "." \
                    and len(nxt) >= 2 and nxt[0][1] == "(" and nxt[1][0] == "string" and nxt[1][1] in DEVICE_NAMES:
                named = f"{text}('{nxt[1][1]}', ...)"
            elif kind == "string":
                m = _NAMED_IN_STRING.search(text)
                if m:
                    named = m.group(0) + " (in generated code)"
            if named:
                bad.append(f"lua/{path}:{line}: names a device ({named}) outside lua/torch/backend/: "
                           "call backend.of(t).<op>, the op of the tensor's device")
    return bad


def test_the_front_end_never_names_a_device():
    assert lua_device_name_violations(lua_tree()) == []


@pytest.mark.parametrize("path, source", [
    ("nn/Fake.lua", "local backend = require 'torch.backend'\nlocal loop = backend.cpu.kernel(2, '$1 = $2')"),
    ("nn/util/fake.lua", "local b = require('torch.backend')\nreturn function(x) return b.of(x) == b.cuda end"),
    ("nnx/Fake.lua", "local cpu = require('torch.backend').cpu"),
    ("luabridge/graph/fake.lua", "local backend = require 'torch.backend'\nlocal t = backend['cpu']"),
    ("nn/Fake.lua", "local backend = require 'torch.backend'\nbackend.register('cpu', { my_op = print })"),
    ("luabridge/graph/fake.lua", "return [[\nlocal unary = require('torch.backend').cpu.ufunc_unary\n]]"),
    ("torch/fake.lua", "local backend = require 'torch.backend'\nlocal mt = backend.cuda.call"),
])
def test_the_device_name_rule_catches_one(path, source):
    files = lua_tree()
    files[path] = source
    found = lua_device_name_violations(files)
    assert any(v.startswith(f"lua/{path}:") for v in found), found


@pytest.mark.parametrize("path, source", [
    ("nn/Fake.lua", "local backend = require 'torch.backend'\nreturn function(x) return backend.of(x).fill(x, 0) end"),
    ("nn/Fake.lua", "-- backend.cpu in a comment\nlocal s = 'backend/cpu/nn_pad.lua'"),
    ("cutorch/fake.lua", "local cuda = require('torch.backend').load('cuda')"),
    ("torch/backend/cpu/fake.lua", "local backend = require 'torch.backend'\nbackend.register('cpu', {})"),
])
def test_the_device_name_rule_allows(path, source):
    files = lua_tree()
    files[path] = source
    assert not [v for v in lua_device_name_violations(files) if v.startswith(f"lua/{path}:")]


# ---- every op the front end calls exists on both devices ----
#
# Read statically: `backend.of(...).name(` and `backend.of(...)['name']`, and `ops.name` where
# `local ops = backend.of(...)`, in every Lua file outside lua/torch/backend/; then looked up in
# both op tables of a runtime with torch, nn and nnx loaded (the CUDA table loads with numpy
# standing in for the array module). An op a device cannot run exists there too, raising the
# error of an op it lacks or the module's own words (backend.lacks).

def lua_op_calls(files: dict[str, str]) -> dict[str, list[str]]:
    """op name -> the places (lua/path:line) that call it through backend.of(...)."""
    calls: dict[str, list[str]] = {}
    for path, src in files.items():
        if path.startswith("torch/backend/"):
            continue
        toks = list(_lua_tokens(src))
        aliases = _backend_aliases(toks)
        tables: set[str] = set()
        for k, (kind, text, line) in enumerate(toks):
            if not (kind == "name" and text in aliases and k + 3 < len(toks) and toks[k + 1][1] == "."
                    and toks[k + 2][1] == "of" and toks[k + 3][1] == "("):
                if kind == "name" and text in tables and (k == 0 or toks[k - 1][1] not in (".", ":")) \
                        and k + 2 < len(toks) and toks[k + 1][1] == "." and toks[k + 2][0] == "name":
                    calls.setdefault(toks[k + 2][1], []).append(f"lua/{path}:{line}")
                continue
            depth, j = 0, k + 3
            while j < len(toks):
                if toks[j][1] == "(":
                    depth += 1
                elif toks[j][1] == ")":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            after = toks[j + 1:j + 4]
            if len(after) >= 2 and after[0][1] == "." and after[1][0] == "name":
                calls.setdefault(after[1][1], []).append(f"lua/{path}:{line}")
            elif len(after) >= 3 and after[0][1] == "[" and after[1][0] == "string" and after[2][1] == "]":
                calls.setdefault(after[1][1], []).append(f"lua/{path}:{line}")
            elif k >= 3 and toks[k - 1][1] == "=" and toks[k - 2][0] == "name" and toks[k - 3][1] == "local":
                tables.add(toks[k - 2][1])
    return calls


def test_the_op_call_reader_sees_calls():
    src = ("local backend = require 'torch.backend'\n"
           "local function f(x, y) backend.of(x:view(2, -1)).crelu_forward(y, x) end\n"
           "local g = backend.of(y)['made_up']\n"
           "local ops = backend.of(x)\nops.adaptive_avg_forward(x)\nlocal n = ops:size()\n")
    calls = lua_op_calls({"nn/Fake.lua": src})
    assert set(calls) == {"crelu_forward", "made_up", "adaptive_avg_forward"}, calls


def _ops_on_both_devices(names: list[str]) -> dict[str, list[str]]:
    """The names (of those given) that a device's op table lacks, with the devices."""
    import luabridge
    got = luabridge.eval("""(function(names)
      require 'torch'; require 'nn'; require 'nnx'
      local backend, out = require 'torch.backend', {}
      for name in names:gmatch('%S+') do
        for _, device in ipairs { 'cpu', 'cuda' } do
          if rawget(backend[device], name) == nil then out[#out + 1] = device .. ' ' .. name end
        end
      end
      return table.concat(out, ',')
    end)""")(" ".join(names))
    missing: dict[str, list[str]] = {}
    for row in filter(None, str(got).split(",")):
        device, name = row.split(" ")
        missing.setdefault(name, []).append(device)
    return missing


def test_every_op_the_front_end_calls_exists_on_both_devices():
    calls = lua_op_calls(lua_tree())
    assert len(calls) > 40
    missing = _ops_on_both_devices(sorted(calls))
    assert not missing, "\n".join(f"{name} missing on {', '.join(devs)}: called at {', '.join(calls[name][:3])}"
                                  for name, devs in sorted(missing.items()))


def test_the_both_devices_check_sees_a_missing_op():
    missing = _ops_on_both_devices(["fill", "no_such_op_anywhere"])
    assert missing == {"no_such_op_anywhere": ["cpu", "cuda"]}
