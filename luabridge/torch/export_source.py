"""The Python source of a converted module tree (`export`'s model.py): a `Model` class in plain
`torch.nn` that needs PyTorch alone.

What each module is made of comes from the conversion itself: while `convert` runs under
`recording()`, every module constructor call is logged with its arguments, so the source calls
the same constructors with the same arguments (the per-class knowledge stays in the converters).
The classes of luabridge.torch that a tree uses (torch7's layers PyTorch lacks: View, SoftMax,
the table layers, the criterions...) are copied into the file from their modules' source, with
the functions and constants they need and nothing else. An nngraph gModule (a torch.fx
GraphModule) becomes a class whose `forward` calls its modules node after node, one local per
node. Tensors a constructor took are written as zeros of their shape: the weights file fills them.
"""
from __future__ import annotations

import ast
import builtins
import contextlib
import functools
import io
import keyword
import math
import operator
import re
import sys
import threading
import tokenize
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import torch
import torch.fx

_RECORDING = threading.Lock()
_WIDTH = 120   # a call longer than this is laid out one argument a line


class ExportError(ValueError):
    """A module that `export` cannot write as source: names its class and its path in the tree
    (torch7's 1-based container indices, as `convert` names them)."""

    def __init__(self, typename: str, path: str, reason: str) -> None:
        self.typename, self.path, self.reason = typename, path, reason
        super().__init__(f"{typename} at {path or '<root>'} {reason}")


Calls = dict[int, tuple[Any, tuple, dict]]


def _module_classes() -> list[type]:
    """The module classes a converter may make: torch.nn's and luabridge.torch's."""
    found = {cls for cls in vars(torch.nn).values() if isinstance(cls, type) and issubclass(cls, torch.nn.Module)}
    for name, module in list(sys.modules.items()):
        if name.startswith("luabridge.torch.") and module is not None:
            found |= {cls for cls in vars(module).values() if isinstance(cls, type)
                      and issubclass(cls, torch.nn.Module) and cls.__module__ == name}
    return sorted(found, key=lambda cls: (cls.__module__, cls.__qualname__))


@contextlib.contextmanager
def recording() -> Iterator[Calls]:
    """Logs the constructor call of every module of torch.nn's or luabridge.torch's classes made
    while it is open: id -> (module, args, kwargs) of the outermost __init__ (the module is kept
    alive, so ids stay unique). Each class's __init__ is wrapped meanwhile and put back after;
    one recording at a time."""
    calls: Calls = {}

    def wrapper(original: Callable[..., None]) -> Callable[..., None]:
        @functools.wraps(original)
        def __init__(self: torch.nn.Module, *args: Any, **kwargs: Any) -> None:
            if id(self) not in calls:
                calls[id(self)] = (self, args, kwargs)
            original(self, *args, **kwargs)
        return __init__

    with _RECORDING:
        undo: list[tuple[type, Any]] = []
        try:
            for cls in _module_classes():
                undo.append((cls, vars(cls).get("__init__")))
                cls.__init__ = wrapper(cls.__init__)   # type: ignore[misc]
            yield calls
        finally:
            for cls, own in reversed(undo):
                if own is None:
                    del cls.__init__
                else:
                    cls.__init__ = own   # type: ignore[misc]


# ---- the definitions of luabridge.torch that a tree's classes need

@dataclass
class _Statement:
    names: list[str]          # what it binds
    text: str                 # its source lines (decorators included)
    uses: set[str]            # the names it reads
    import_from: str | None = None   # a luabridge module it imports `names` from (relative import)
    imported: dict[str, str] = field(default_factory=dict)   # alias -> original name (that import)
    is_import: bool = False


def _parse_module(module: str) -> dict[str, _Statement]:
    """The top-level statements of a luabridge module's source, by the names they bind."""
    path = Path(sys.modules[module].__file__ or "")
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines(keepends=True)
    package = module.rpartition(".")[0]
    out: dict[str, _Statement] = {}
    for node in ast.parse(source).body:
        start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        text = "".join(lines[start - 1:node.end_lineno])
        uses = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            statement = _Statement([node.name], text, uses)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
            statement = _Statement(names, text, uses - set(names))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                name = alias.asname or alias.name.partition(".")[0]
                line = f"import {alias.name}" + (f" as {alias.asname}" if alias.asname else "")
                if name not in out:   # `import torch` before `import torch.fx`: the first binds it
                    out[name] = _Statement([name], line, set(), is_import=True)
            continue
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
            if node.level:   # a module of luabridge: its definitions are copied in turn
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                origin = f"{base}.{node.module}" if node.module else base
            else:
                origin = node.module or ""
            for alias in node.names:
                name = alias.asname or alias.name
                line = f"from {origin} import {alias.name}" + (f" as {alias.asname}" if alias.asname else "")
                luabridge = origin == "luabridge" or origin.startswith("luabridge.")
                out[name] = _Statement([name], line, set(), import_from=origin if luabridge else None,
                                       imported={name: alias.name}, is_import=True)
            continue
        else:
            continue
        for name in statement.names:
            out[name] = statement
    return out


class _Definitions:
    """The luabridge definitions (classes, functions, constants) written into the file, each
    before what uses it, renamed where two modules define the same name (`Pointwise`)."""

    def __init__(self) -> None:
        self.parsed: dict[str, dict[str, _Statement]] = {}
        self.final: dict[tuple[str, str], str] = {}   # (module, name) -> its name in the file
        self.taken: dict[str, tuple[str, str]] = {}
        self.imports: set[str] = set()
        self.blocks: list[str] = []
        self.written: set[int] = set()

    def _statements(self, module: str) -> dict[str, _Statement]:
        if module not in self.parsed:
            self.parsed[module] = _parse_module(module)
        return self.parsed[module]

    def _claim(self, module: str, name: str) -> str:
        final = name
        if name in self.taken and self.taken[name] != (module, name):
            final = f"{name}_{module.rpartition('.')[2]}"
        self.taken[final] = (module, name)
        self.final[module, name] = final
        return final

    def need(self, module: str, name: str) -> str | None:
        """The name in the file of `name` as `module` sees it (None: a builtin or a local)."""
        if (module, name) in self.final:
            return self.final[module, name]
        statement = self._statements(module).get(name)
        if statement is None:
            return None
        if statement.import_from is not None:
            origin = statement.import_from
            if origin not in sys.modules or not origin.startswith("luabridge.torch"):
                raise ExportError(name, "", f"comes from {origin}, which the exported file cannot import")
            final = self.need(origin, statement.imported[name])
            self.final[module, name] = final or name
            return self.final[module, name]
        if statement.is_import:
            self.imports.add(statement.text)
            self.final[module, name] = name
            self.taken.setdefault(name, (module, name))
            return name
        final = self._claim(module, name)
        for other in statement.names:
            if other != name:
                self._claim(module, other)
        renames = {}
        for used in sorted(statement.uses):
            if used in statement.names or hasattr(builtins, used) and used not in self._statements(module):
                continue
            target = self.need(module, used)
            if target is not None and target != used:
                renames[used] = target
        renames.update({n: self.final[module, n] for n in statement.names if self.final[module, n] != n})
        if id(statement) not in self.written:
            self.written.add(id(statement))
            self.blocks.append(_renamed(statement.text, renames))
        return final

    def of_class(self, cls: type) -> str:
        name = self.need(cls.__module__, cls.__name__)
        if name is None:
            raise ExportError(cls.__name__, "", f"is not defined at the top of {cls.__module__}")
        return name


def _renamed(text: str, renames: dict[str, str]) -> str:
    """text with the names of `renames` replaced (names only: not attributes, not in strings)."""
    if not renames:
        return text
    lines = text.splitlines(keepends=True)
    edits = []
    previous = None
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.NAME and tok.string in renames and not (previous and previous.string == "."):
            edits.append(tok)
        if tok.type not in (tokenize.NL, tokenize.COMMENT):
            previous = tok
    for tok in reversed(edits):
        row, col = tok.start
        line = lines[row - 1]
        lines[row - 1] = line[:col] + renames[tok.string] + line[col + len(tok.string):]
    return "".join(lines)


# ---- expressions, laid out

@dataclass
class _Call:
    """An expression to write: `head(args...)`, or a bracketed list (`head` "[" / "(" ...)."""
    head: str
    args: list[Any]
    close: str = ")"

    def render(self, indent: int) -> str:
        flat = self.head + ", ".join(_render(a, 0) for a in self.args) + self._close()
        if len(flat) + indent <= _WIDTH and "\n" not in flat:
            return flat
        if len(self.args) == 1 and isinstance(self.args[0], _Call) and self.args[0].head in ("[", "(", "{"):
            return self.head + self.args[0].render(indent) + self.close   # f([ ... ]): the list hugs the call
        inner = " " * (indent + 4)
        parts = [inner + _render(a, indent + 4) + ",\n" for a in self.args]
        return self.head + "\n" + "".join(parts) + " " * indent + self.close

    def _close(self) -> str:
        return "," + self.close if self.close == ")" and self.head == "(" and len(self.args) == 1 else self.close


def _render(value: Any, indent: int) -> str:
    return value.render(indent) if isinstance(value, _Call) else value


def _quoted(text: str) -> str:
    """A string literal, in double quotes where it can be."""
    return f'"{text}"' if text.isprintable() and '"' not in text and "\\" not in text else repr(text)


def _identifier(name: str) -> bool:
    return name.isidentifier() and not keyword.iskeyword(name)


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def _attribute(owner: str, name: str) -> str:
    return f"{owner}.{name}" if _identifier(name) else f"getattr({owner}, {_quoted(name)})"


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _typename(module: torch.nn.Module) -> str:
    return type(module).__name__


@dataclass
class _Scope:
    """One generated class's __init__: the modules bound to locals (those used twice)."""
    statements: list[str] = field(default_factory=list)
    bound: dict[int, str] = field(default_factory=dict)
    names: set[str] = field(default_factory=lambda: {"self"})

    def local(self, base: str) -> str:
        name, n = base, 1
        while name in self.names or not _identifier(name):
            n += 1
            name = f"{base}_{n}"
        self.names.add(name)
        return name


class SourceWriter:
    """Writes the source of `root`, a converted module tree whose constructor calls are `calls`."""

    def __init__(self, root: torch.nn.Module, calls: Calls, description: str) -> None:
        self.root, self.calls, self.description = root, calls, description
        self.definitions = _Definitions()
        self.classes: list[str] = []     # generated classes (the graphs'), before Model
        self.graph_names: dict[int, str] = {}
        self.uses: dict[int, int] = {}
        self.imports = {"import torch"}
        for _, module in root.named_modules(remove_duplicate=False):
            self.uses[id(module)] = self.uses.get(id(module), 0) + 1

    # -- values

    def _value(self, value: Any, owner: torch.nn.Module, path: str, scope: _Scope) -> Any:
        """A constructor argument as source."""
        if isinstance(value, str):
            return _quoted(value)
        if value is None or isinstance(value, (bool, int)):
            return repr(value)
        if isinstance(value, float):
            return repr(value) if math.isfinite(value) else f"float({str(value)!r})"
        if isinstance(value, torch.dtype):
            return str(value)
        if isinstance(value, torch.nn.Module):
            name = next((n for n, m in owner._modules.items() if m is value), None)
            return self.module(value, _join(path, name) if name else path, scope)
        if isinstance(value, torch.Tensor):
            return self._tensor(value, owner, path)
        if isinstance(value, (list, tuple)):
            items = [self._value(v, owner, path, scope) for v in value]
            return _Call("[" if isinstance(value, list) else "(", items, "]" if isinstance(value, list) else ")")
        if isinstance(value, dict):
            items = [f"{_quoted(k) if isinstance(k, str) else repr(k)}: {_render(self._value(v, owner, path, scope), 0)}" for k, v in value.items()]
            return _Call("{", items, "}")
        if callable(value) and getattr(value, "__module__", "").startswith("luabridge."):
            return self.definitions.need(value.__module__, value.__name__) or value.__name__
        if callable(value) and getattr(torch.nn.functional, getattr(value, "__name__", ""), None) is value:
            return f"torch.nn.functional.{value.__name__}"
        raise ExportError(_typename(owner), path, f"takes {type(value).__name__} {value!r}, which export cannot write")

    def _tensor(self, value: torch.Tensor, owner: torch.nn.Module, path: str) -> str:
        """A tensor argument: zeros of its shape where it becomes a weight or buffer (the weights
        file fills it), its values where it is small, else an ExportError."""
        held = [t for t in (*owner.parameters(recurse=False), *owner.buffers(recurse=False)) if t is not None]
        key = (value.untyped_storage().data_ptr(), value.storage_offset(), tuple(value.shape))
        if any((t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape)) == key for t in held):
            return f"torch.zeros({tuple(value.shape)!r}, dtype={value.dtype})"
        if value.numel() <= 64:
            return f"torch.tensor({value.tolist()!r}, dtype={value.dtype})"
        raise ExportError(_typename(owner), path, f"takes a tensor of {value.numel()} elements that is not one of its "
                                                  "weights or buffers, which export does not write into the source")

    def class_ref(self, cls: type, path: str) -> str:
        if cls.__module__.startswith("luabridge."):
            return self.definitions.of_class(cls)
        if getattr(torch.nn, cls.__name__, None) is cls:
            return f"torch.nn.{cls.__name__}"
        raise ExportError(cls.__name__, path, "has no plain torch.nn counterpart that export can write "
                                              f"(class {cls.__module__}.{cls.__qualname__})")

    # -- modules

    def module(self, m: torch.nn.Module, path: str, scope: _Scope) -> Any:
        """The expression making module m (a local when the tree holds it twice)."""
        if id(m) in scope.bound:
            return scope.bound[id(m)]
        made = self._make(m, path, scope)
        if self.uses.get(id(m), 1) > 1:
            name = scope.local(_snake(_typename(m)))
            scope.statements.append(f"{name} = {_render(made, 8 + len(name) + 3)}")
            scope.bound[id(m)] = name
            return name
        return made

    def _make(self, m: torch.nn.Module, path: str, scope: _Scope) -> Any:
        if isinstance(m, torch.fx.GraphModule):
            return f"{self.graph_class(m, path)}()"
        if type(m) is torch.nn.Sequential:
            self.imports.add("from collections import OrderedDict")
            items = [_Call("(", [_quoted(name), self.module(child, _join(path, name), scope)])
                     for name, child in m._modules.items()]
            return _Call("torch.nn.Sequential(OrderedDict(", [_Call("[", items, "]")], "))")
        call = self._constructor(m, path, scope)
        return self._parametrized(m, path, call)

    def _constructor(self, m: torch.nn.Module, path: str, scope: _Scope) -> _Call:
        record = self.calls.get(id(m))
        if record is None or record[0] is not m:
            raise ExportError(_typename(m), path, "was not made by the conversion, so export cannot tell its "
                                                  "constructor's arguments")
        _, args, kwargs = record
        cls = _base_class(m)
        arguments = [self._value(a, m, path, scope) for a in args]
        arguments += [f"{k}={_render(self._value(v, m, path, scope), 0)}" for k, v in kwargs.items()]
        given = list(_modules_in((args, kwargs)))
        for name, child in m._modules.items():
            if child is not None and not any(child is g for g in given) and name != "parametrizations":
                raise ExportError(_typename(m), path, f"holds the module {name} ({_typename(child)}) that its "
                                                      "constructor was not given, which export cannot write")
        return _Call(f"{self.class_ref(cls, path)}(", arguments)

    def _parametrized(self, m: torch.nn.Module, path: str, made: Any) -> Any:
        """torch's weight_norm around the module where the conversion applied it."""
        parametrizations = getattr(m, "parametrizations", None)
        if parametrizations is None:
            return made
        for tensor, chain in parametrizations.items():
            for p in chain:
                if type(p).__name__ != "_WeightNorm":
                    raise ExportError(_typename(m), path, f"has the parametrization {type(p).__name__} on "
                                                          f"{tensor}, which export cannot write")
                made = _Call("torch.nn.utils.parametrizations.weight_norm(", [made, _quoted(tensor), f"dim={p.dim}"])
        return made

    # -- graphs

    def graph_class(self, gm: torch.fx.GraphModule, path: str, name: str | None = None,
                    extra: list[str] | None = None) -> str:
        """Writes the class of an nngraph gModule; its name."""
        if id(gm) in self.graph_names:
            return self.graph_names[id(gm)]
        name = name or f"Graph{len(self.graph_names) + 1}"
        self.graph_names[id(gm)] = name
        scope = _Scope()
        adds = [self._add(child_name, child, _join(path, child_name), scope)
                for child_name, child in gm._modules.items()]
        body = [f"class {name}(torch.nn.Module):",
                f'    """{self.description if path == "" else "nngraph gModule at " + path}: its nodes in '
                'topological order."""', "",
                "    def __init__(self) -> None:", "        super().__init__()",
                *("        " + s for s in scope.statements), *adds, *(extra or []), ""]
        body += self._forward(gm, path)
        self.classes.append("\n".join(body) + "\n")
        return name

    def _add(self, name: str, child: torch.nn.Module, path: str, scope: _Scope) -> str:
        made = self.module(child, path, scope)
        if _identifier(name) and not hasattr(torch.nn.Module, name):
            return f"        self.{name} = {_render(made, 8)}"
        return f"        self.add_module({_quoted(name)}, {_render(made, 8)})"

    def _forward(self, gm: torch.fx.GraphModule, path: str) -> list[str]:
        names: dict[torch.fx.Node, str] = {}
        taken = {"self"}

        def local(base: str) -> str:
            base = base if _identifier(base) else "_" + base
            name, n = base, 1
            while name in taken:
                n += 1
                name = f"{base}_{n}"
            taken.add(name)
            return name

        def value(arg: Any) -> str:
            if isinstance(arg, torch.fx.Node):
                return names[arg]
            if isinstance(arg, (list, tuple)):
                return "[" + ", ".join(value(a) for a in arg) + "]"
            return repr(arg)

        params, lines = [], []
        for node in gm.graph.nodes:
            if node.op == "placeholder":
                names[node] = local(node.target)
                params.append(names[node])
            elif node.op == "call_module":
                target = str(node.target)
                sub = gm.get_submodule(target)
                names[node] = local(target if _identifier(target) else _snake(_typename(sub)))
                lines.append(f"        {names[node]} = {_attribute('self', target)}({value(node.args[0])})")
            elif node.op == "call_function" and node.target is operator.getitem:
                names[node] = local(f"{value(node.args[0])}_{node.args[1] + 1}")
                lines.append(f"        {names[node]} = {value(node.args[0])}[{node.args[1]}]")
            elif node.op == "output":
                lines.append(f"        return {value(node.args[0])}")
            else:
                raise ExportError("nn.gModule", path, f"has a graph node ({node.op} {node.target}) export cannot write")
        return [f"    def forward(self, {', '.join(params)}):", *lines]

    # -- the file

    def source(self) -> str:
        root = self.root
        ties = self._ties()
        if isinstance(root, torch.fx.GraphModule):
            self.graph_class(root, "", name="Model", extra=ties)
            model = ""
        else:
            model = self._model_class(root, ties)
        definitions = self.definitions
        imports = _merged(self.imports | definitions.imports)
        def order(line: str) -> tuple:
            return (line.split()[1], not line.startswith("import"), line)
        stdlib = sorted((i for i in imports if not i.split()[1].startswith("torch")), key=order)
        torchs = sorted((i for i in imports if i.split()[1].startswith("torch")), key=order)
        lacking = (["", "The classes before Model stand for torch7 layers that torch.nn lacks (torch7's semantics:",
                    "1-based dims and indices where torch7 takes them)."] if definitions.blocks else [])
        header = [f'"""{self.description}, written by luabridge as plain PyTorch (it needs PyTorch alone):', "",
                  "    model = Model()",
                  '    model.load_state_dict(safetensors.torch.load_file("model.safetensors"))',
                  "    model.eval()", *lacking, '"""', "from __future__ import annotations", "",
                  *stdlib, *([""] if stdlib else []), *torchs, "", "", ""]
        parts = ["\n".join(header)]
        parts += [block.rstrip("\n") + "\n\n\n" for block in definitions.blocks]
        parts += [c + "\n\n" for c in self.classes]
        if model:
            parts.append(model)
        return "".join(parts).rstrip("\n") + "\n"

    def _model_class(self, root: torch.nn.Module, ties: list[str]) -> str:
        scope = _Scope()
        if type(root) is torch.nn.Sequential:
            adds = [self._add(name, child, name, scope) for name, child in root._modules.items()]
            init = [*("        " + s for s in scope.statements), *adds, *ties]
            lines = ["class Model(torch.nn.Module):", f'    """{self.description}: its layers in order."""', "",
                     "    def __init__(self) -> None:", "        super().__init__()", *init, "",
                     "    def forward(self, x):", "        for layer in self._modules.values():",
                     "            x = layer(x)", "        return x"]
            return "\n".join(lines) + "\n"
        call = self._constructor(root, "", scope)
        base = call.head[:-1]
        args = _Call("super().__init__(", call.args).render(8)
        init = [*("        " + s for s in scope.statements), f"        {args}"]
        for tensor, chain in (getattr(root, "parametrizations", None) or {}).items():
            for p in chain:
                self._parametrized(root, "", "")   # checks it is a weight_norm
                init.append(f"        torch.nn.utils.parametrizations.weight_norm(self, {_quoted(tensor)}, dim={p.dim})")
        init += ties
        lines = [f"class Model({base}):", f'    """{self.description}."""', "",
                 "    def __init__(self) -> None:", *init]
        return "\n".join(lines) + "\n"

    def _ties(self) -> list[str]:
        """Lines tying the parameters two modules share (torch7's clone('weight', 'bias')) after
        they are made."""
        seen: dict[int, tuple[str, torch.nn.Module]] = {}
        lines = []
        for module_path, module in self.root.named_modules(remove_duplicate=False):
            for name, p in module._parameters.items():
                if p is None:
                    continue
                first_path, first_module = seen.setdefault(id(p), (_join(module_path, name), module))
                if first_module is not module:
                    lines.append(f"        {_owner(module_path)}.{name} = {_owner(first_path.rpartition('.')[0])}"
                                 f".{first_path.rpartition('.')[2]}")
        if lines:
            lines.insert(0, "        # parameters the torch7 modules shared (clone('weight', 'bias', ...))")
        return lines


def _merged(imports: set[str]) -> set[str]:
    """`from m import a` and `from m import b` as `from m import a, b`."""
    names: dict[str, list[str]] = {}
    out = set()
    for line in imports:
        words = line.split()
        if words[0] == "from":
            names.setdefault(words[1], []).append(" ".join(words[3:]))
        else:
            out.add(line)
    return out | {f"from {module} import {', '.join(sorted(set(n)))}" for module, n in names.items()}


def _owner(module: str) -> str:
    return f"self.get_submodule({_quoted(module)})" if module else "self"


def _base_class(m: torch.nn.Module) -> type:
    """The module's class, or the class it had before a parametrization made it Parametrized*."""
    cls = type(m)
    if getattr(m, "parametrizations", None) is not None and cls.__name__.startswith("Parametrized"):
        return cls.__bases__[0]
    return cls


def _modules_in(value: Any) -> Iterator[torch.nn.Module]:
    if isinstance(value, torch.nn.Module):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _modules_in(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _modules_in(v)


def write_source(root: torch.nn.Module, calls: Calls, description: str) -> str:
    """The model.py of a converted tree (`calls`: its constructor calls, from `recording`)."""
    return SourceWriter(root, calls, description).source()
