"""The Python layers of ../shared/DESIGN.md, checked on the source of luabridge/.

Every import is read from the syntax tree: module level, inside functions and inside `if`
blocks alike, relative imports resolved, `from pkg import name` counted as an import of the
module pkg.name when there is one (else of pkg), importlib.import_module of a literal name as an
import of that module (of a computed name: of the targets listed in COMPUTED). Imports under
`if TYPE_CHECKING:` never run: they obey the layer rules but make no import cycle. Importing luabridge.a.b runs the package inits luabridge/__init__.py
and luabridge/a/__init__.py first; those inits are the start-up (they register the callbacks
and providers of the layers above), so they count as importers of what they import, not as
something every module imports.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "luabridge"

# Modules whose own imports are leaves only (checked below), so every layer may use them:
# errors (LuaError and its messages), paths (where the Lua tree is: read while the runtime
# itself is being imported), t7format (the .t7 format's constants and its reader of Lua table
# files, no Lua run), dtypes (the element-type table, read from lua/ with t7format's reader).
LEAVES = {"luabridge.errors", "luabridge.paths", "luabridge.t7format", "luabridge.dtypes"}

# The bottom layers and what each may import besides the leaves: memory (the buffers lent to
# Lua), runtime (one Lua runtime per thread; the backends register their callbacks with it at
# start-up), interop (numpy / DLPack <-> Lua tensors: it takes Lua tensors and arrays only),
# proxy (Lua objects as Python objects; it unwraps proxies before calling interop).
BELOW = {
    "luabridge.memory": set(),
    "luabridge.runtime": {"luabridge.memory"},
    "luabridge.interop": {"luabridge.runtime", "luabridge.memory"},
    "luabridge.proxy": {"luabridge.interop", "luabridge.runtime", "luabridge.memory"},
}

# What the graph package must never import: the front ends built on it.
FRONT_ENDS = ("luabridge.tinyflow", "luabridge.cli", "luabridge.__main__", "luabridge.repl", "luabridge.torch")


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
        return f"{self.source} -> {self.target} ({MODULES[self.source].relative_to(ROOT.parent)}:{self.line})"


def _existing(name: str) -> str:
    """The longest prefix of a dotted name that is a module of the package."""
    while name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
           (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


class _Imports(ast.NodeVisitor):
    def __init__(self, module: str) -> None:
        self.module = module
        self.package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
        self.found: list[Import] = []
        self.dynamic: list[tuple[int, ast.expr]] = []   # import_module of a computed name
        self.type_only = False

    def _add(self, target: str, line: int) -> None:
        if target == "luabridge" or target.startswith("luabridge."):
            self.found.append(Import(self.module, _existing(target), line, self.type_only))

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
            self._add(sub if sub in MODULES else origin, node.lineno)

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


def _parse(module: str) -> _Imports:
    visitor = _Imports(module)
    visitor.visit(ast.parse(MODULES[module].read_text(), str(MODULES[module])))
    return visitor


# The modules that import computed names (importlib.import_module(f"...")), and what they load:
# the package's lazy attributes luabridge.nn, luabridge.optim, luabridge.t7.
COMPUTED = {"luabridge": {"luabridge.nn", "luabridge.optim", "luabridge.t7"}}

PARSED = {m: _parse(m) for m in MODULES}
IMPORTS = sorted({i for v in PARSED.values() for i in v.found}
                 | {Import(m, target, line, False) for m, targets in COMPUTED.items() if m in PARSED
                    for line, _ in PARSED[m].dynamic for target in targets}, key=str)


def _imports_of(module: str) -> list[Import]:
    return [i for i in IMPORTS if i.source == module and i.target != module]


def test_the_import_reader_sees_imports_inside_functions_and_relative_ones() -> None:
    """The reader itself, on a known edge: graph/__init__'s lazy `from .session import Session`
    inside __getattr__ is a relative import inside a function."""
    assert any(i.source == "luabridge.graph" and i.target == "luabridge.graph.session" for i in IMPORTS)
    assert len(MODULES) > 40 and len(IMPORTS) > 100


def test_leaves_import_only_leaves() -> None:
    bad = [str(i) for m in LEAVES for i in _imports_of(m) if i.target not in LEAVES]
    assert not bad, "a leaf module imports a layer:\n" + "\n".join(bad)


@pytest.mark.parametrize("module", sorted(BELOW))
def test_bottom_layers_import_only_what_is_below_them(module: str) -> None:
    allowed = BELOW[module] | LEAVES
    bad = [str(i) for i in _imports_of(module) if i.target not in allowed]
    assert not bad, f"{module} may import only {sorted(allowed)}:\n" + "\n".join(bad)


def test_graph_never_imports_the_front_ends() -> None:
    bad = [str(i) for i in IMPORTS if i.source.startswith("luabridge.graph")
           and i.target.startswith(FRONT_ENDS)]
    assert not bad, "\n".join(bad)


def test_t7_runs_no_lua_and_knows_no_graph() -> None:
    """t7 is the pure-Python .t7 reader/writer: leaves only (no runtime, no graph/)."""
    bad = [str(i) for i in _imports_of("luabridge.t7") if i.target not in LEAVES]
    assert not bad, "\n".join(bad)


def test_passes_never_import_the_executor() -> None:
    runners = ("luabridge.graph.executor", "luabridge.graph.session")
    bad = [str(i) for i in IMPORTS if i.source.startswith("luabridge.graph.passes") and i.target in runners]
    assert not bad, "\n".join(bad)


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


def test_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycles() -> None:
    edges: dict[str, set[str]] = {}
    for i in IMPORTS:
        if not i.type_only and i.target != i.source:
            edges.setdefault(i.source, set()).add(i.target)
    cycles = _cycles(edges)
    detail = ["  " + " <-> ".join(c) + ":\n" + "\n".join(
        f"    {i}" for i in IMPORTS if i.source in c and i.target in c and not i.type_only) for c in cycles]
    assert not cycles, "import cycles:\n" + "\n".join(detail)


def test_computed_imports_are_listed_with_their_targets() -> None:
    """import_module of a computed name cannot be read from the source: each module doing it
    is listed in COMPUTED with what it can load, so that the rules and the cycle check see it."""
    dynamic = {m for m, v in PARSED.items() if v.dynamic}
    assert dynamic == set(COMPUTED), (
        "modules importing computed names must be listed in COMPUTED with their targets: "
        f"unlisted {sorted(dynamic - set(COMPUTED))}, listed but gone {sorted(set(COMPUTED) - dynamic)}")


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
