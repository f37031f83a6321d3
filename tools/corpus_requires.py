"""The requires depth of the corpus (tools/real_programs.py): what every Lua file of a repository
requires, and which of the package functions it names luabridge lacks, read from the source.

A require resolves when the repository (or a library the manifest gives it) holds the module, or
when `require` succeeds in a luabridge runtime. A require inside `pcall(require, 'x')` is optional
and never fails a file. Names like `nn.Foo` or `torch.bar` that real code reaches for are checked
against the loaded packages, less those the repository defines itself.
"""
from __future__ import annotations

import fnmatch
import json
import os
import posixpath
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

# a literal module name; `require('datasets/' .. name)` builds one at run time and is not read
REQUIRE = re.compile(r"""(pcall\s*\(\s*)?\brequire\s*\(?\s*(?:'([^'\n]+)'|"([^"\n]+)"|\[\[([^\]\n]+)\]\])(?!\s*\.\.)""")
# names real code reaches for in the packages whose tables we can inspect
PACKAGES = ("torch", "nn", "nngraph", "optim", "image", "paths", "xlua", "gnuplot", "dpnn", "rnn", "tds")
NAME_USE = re.compile(r"(?<![\w.:])(" + "|".join(PACKAGES) + r")\.([A-Za-z_]\w*)")
DEFINED = (re.compile(r"""class\s*\(\s*['"](\w+)\.(\w+)['"]"""),
           re.compile(r"(?<![\w.])(\w+)\.(\w+)\s*=[^=]"),
           re.compile(r"function\s+(\w+)\.(\w+)\s*\("))
LOCAL = re.compile(r"\blocal\s+(?:function\s+)?(\w+)")
PARAMS = re.compile(r"\bfunction\b[^(\n]*\(([^)]*)\)")
LONG_COMMENT = re.compile(r"--\[(=*)\[.*?\]\1\]", re.S)
LINE_COMMENT = re.compile(r"--[^\n]*")
STRING = re.compile(r"""'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*"|\[(=*)\[.*?\]\1\]""", re.S)


@dataclass
class FileRequires:
    path: str
    required: list[str] = field(default_factory=list)
    optional: list[str] = field(default_factory=list)
    names: set[tuple[str, str]] = field(default_factory=set)


def strip_comments(source: str) -> str:
    return LINE_COMMENT.sub("", LONG_COMMENT.sub("", source))


def scan_file(path: Path, rel: str) -> FileRequires:
    text = strip_comments(path.read_text(errors="replace"))
    found = FileRequires(rel)
    for m in REQUIRE.finditer(text):
        name = (m.group(2) or m.group(3) or m.group(4)).strip()
        (found.optional if m.group(1) else found.required).append(name)
    code = STRING.sub('""', text)
    # a file that binds a package's name to something of its own (`local rnn = nn.LSTM(...)`,
    # `function f(optim, ...)`) uses that name for it: its fields are not the package's
    shadowed = set(LOCAL.findall(code)) | {p for params in PARAMS.findall(code) for p in re.findall(r"\w+", params)}
    found.names = {(m.group(1), m.group(2)) for m in NAME_USE.finditer(code) if m.group(1) not in shadowed}
    return found


def defined_names(texts: list[str]) -> set[tuple[str, str]]:
    out: set[tuple[str, str]] = set()
    for text in texts:
        for pattern in DEFINED:
            out.update(pattern.findall(text))
    return out


def lua_files(root: Path, exclude: list[str]) -> list[tuple[Path, str]]:
    files = []
    for path in sorted(root.rglob("*.lua")):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and not any(fnmatch.fnmatch(rel, g) for g in exclude):
            files.append((path, rel))
    return files


def in_repository(name: str, rels: set[str], requirer: str, packages: set[str]) -> bool:
    """A module the repository holds: wherever its scripts are run from, as its rockspec installs
    it (`torchnet.env` is torchnet's env.lua, `torchnet` its init.lua), or as a path from the
    requiring file (th's require takes '..', '../', './util' and 'lib/x.lua')."""
    if "/" in name or name.endswith(".lua") or name in (".", ".."):
        path = name[:-4] if name.endswith(".lua") else name
        stem = posixpath.normpath(posixpath.join(posixpath.dirname(requirer), path))
        return any(posixpath.normpath(c) in rels for c in (stem + ".lua", posixpath.join(stem, "init.lua"))) \
            or holds(posixpath.normpath(path).lstrip("./"), rels)
    head, _, rest = name.partition(".")
    if head in packages:
        return holds(posixpath.normpath(rest.replace(".", "/")), rels) if rest else "init.lua" in rels
    # Lua's searchers turn every '.' into '/': 'library..util' is library//util.lua
    return holds(posixpath.normpath(name.replace(".", "/")), rels)


PACKAGE = re.compile(r"""^\s*package\s*=\s*["']([^"']+)["']""", re.M)


def rockspec_packages(root: Path) -> set[str]:
    return {m for spec in root.rglob("*.rockspec") for m in PACKAGE.findall(spec.read_text(errors="replace"))}


def holds(stem: str, rels: set[str]) -> bool:
    if stem == "":
        return False
    for rel in rels:
        if rel == stem + ".lua" or rel.endswith("/" + stem + ".lua") or rel == stem + "/init.lua" \
                or rel.endswith("/" + stem + "/init.lua"):
            return True
    return False


CHECK = r"""
local cjson = require 'cjson'
local function slurp(path) local f = assert(io.open(path)) local s = f:read('*a') f:close() return s end
local names, uses = cjson.decode(slurp(arg[1])), cjson.decode(slurp(arg[2]))
local out = { modules = {}, names = {} }
for _, name in ipairs(names) do
   local ok, err = pcall(require, name)
   out.modules[name] = ok and true or tostring(err):match('^[^\n]*')
end
for _, pkg in ipairs({'torch', 'nn', 'nngraph', 'optim', 'image', 'paths', 'xlua', 'gnuplot', 'dpnn', 'rnn', 'tds'}) do
   pcall(require, pkg)
end
for _, use in ipairs(uses) do
   local pkg = rawget(_G, use[1]) or package.loaded[use[1]]
   local ok, value = pcall(function() return pkg[use[2]] end)
   out.names[use[1] .. '.' .. use[2]] = ok and value ~= nil
end
io.write(cjson.encode(out))
"""


def check_in_luabridge(command: list[str], names: list[str], uses: list[tuple[str, str]], scratch: Path,
                       timeout: float = 600.0) -> dict:
    """One runtime answers for every module name and package field at once."""
    (scratch / "check.lua").write_text(CHECK)
    (scratch / "names.json").write_text(json.dumps(sorted(names)))
    (scratch / "uses.json").write_text(json.dumps(sorted(uses)))
    # the CUDA packages load on the CPU's stand-in backend: whether they load is what is asked
    env = {**os.environ, "LUABRIDGE_CUDA_ARRAY_MODULE": "numpy"}
    proc = subprocess.run([*command, "th", "check.lua", "names.json", "uses.json"], cwd=scratch, env=env,
                          capture_output=True, text=True, errors="replace", timeout=timeout)
    out = proc.stdout
    start = out.find('{"')
    if proc.returncode != 0 or start < 0:
        raise RuntimeError("the requires check failed: " + (proc.stderr or out)[-2000:])
    return json.loads(out[start:])
