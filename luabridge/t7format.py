"""The .t7 format's rules shared with the Lua reader: lua/torch/t7format.lua, parsed here
without running Lua (a table constructor of numbers, strings and tables), and what a file that
is not a .t7 looks like (`describe`), by the same rules as File.lua's."""
from __future__ import annotations

import re
import struct
from typing import Any, Optional

from .paths import lua_dir

_TOKEN = re.compile(r"""\s+|--[^\n]*|(?P<str>'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*")"""
                    r"|(?P<num>-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)|(?P<name>[A-Za-z_]\w*)|(?P<sym>[{}\[\]=,;])", re.S)
_ESCAPE = re.compile(r"\\(\d{1,3}|.)", re.S)
_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", "'": "'", '"': '"'}


def _unescape(body: str) -> bytes:
    def one(m: re.Match) -> str:
        e = m.group(1)
        if e.isdigit():
            return chr(int(e))
        if e not in _ESCAPES:
            raise ValueError(f"t7format.lua: unsupported escape \\{e}")
        return _ESCAPES[e]
    return _ESCAPE.sub(one, body).encode("latin-1")


def _tokens(text: str) -> list[tuple[str, Any]]:
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ValueError(f"t7format.lua: cannot parse {text[pos:pos + 20]!r}")
        pos = m.end()
        if m.lastgroup == "str":
            raw = _unescape(m.group()[1:-1])
            out.append(("value", raw.decode("latin-1") if raw.isascii() else raw))
        elif m.lastgroup == "num":
            out.append(("value", float(m.group()) if "." in m.group() or "e" in m.group().lower()
                        else int(m.group())))
        elif m.lastgroup in ("name", "sym"):
            out.append((m.lastgroup, m.group()))
    return out


def parse(text: str) -> Any:
    """The value `return <constructor>` in text evaluates to: tables of positional fields only
    are lists, others dicts."""
    tokens = _tokens(text)
    if tokens[:1] != [("name", "return")]:
        raise ValueError("t7format.lua: expected 'return {'")
    value, end = _value(tokens, 1)
    if end != len(tokens):
        raise ValueError("t7format.lua: text after the table")
    return value


def _value(tokens: list, i: int) -> tuple[Any, int]:
    kind, text = tokens[i]
    if kind == "value":
        return text, i + 1
    if text != "{":
        raise ValueError(f"t7format.lua: unexpected {text!r}")
    fields: dict = {}
    i, n, named = i + 1, 0, False
    while tokens[i] != ("sym", "}"):
        if tokens[i][0] == "name" and tokens[i + 1] == ("sym", "="):
            key, i, named = tokens[i][1], i + 2, True
        elif tokens[i] == ("sym", "["):
            key, i = _value(tokens, i + 1)
            if tokens[i:i + 2] != [("sym", "]"), ("sym", "=")]:
                raise ValueError("t7format.lua: expected '] ='")
            i, named = i + 2, True
        else:
            n += 1
            key = n
        fields[key], i = _value(tokens, i)
        if tokens[i] in (("sym", ","), ("sym", ";")):
            i += 1
    return (fields if named else list(fields.values())), i + 1


SPEC: dict = parse((lua_dir() / "torch" / "t7format.lua").read_text())
TYPES: dict[str, int] = SPEC["types"]
MAX_DEPTH: int = SPEC["maxDepth"]
MAX_DIMS: int = SPEC["maxDims"]
MAX_INDEX: int = SPEC["maxIndex"]
MAX_TOKEN: int = SPEC["maxToken"]
MAX_CLASS_NAME: int = SPEC["maxClassName"]
CLASS_NAME = re.compile(rb"[A-Za-z0-9%s]{1,%d}\Z" % (re.escape(SPEC["classNamePunctuation"].encode()), MAX_CLASS_NAME))
_NOT_T7 = [(magic if isinstance(magic, bytes) else magic.encode("latin-1"), what) for magic, what in SPEC["notT7"]]
_LAST_CODE = max(TYPES.values())
HEAD_BYTES = 256  # what describe looks at
_CONTROL = re.compile(rb"[\x00-\x08\x0e-\x1f\x7f]")
_ASCII_START = re.compile(rb"\s*[0-%d]\s" % _LAST_CODE)


def bytecode_kind(head: bytes) -> tuple[str, bool]:
    """What a function's bytecode is, and whether this runtime's LuaJIT (2.1, GC64, little-endian:
    the build lupa ships) can load it."""
    if head[:3] == b"\x1bLJ" and len(head) >= 5:
        name = SPEC["luajitVersions"].get(head[3], f"LuaJIT (bytecode version {head[3]})")
        if head[4] & SPEC["luajitFlagBigEndian"]:
            return f"big-endian {name} bytecode", False
        if head[3] == 2 and not head[4] & SPEC["luajitFlagGC64"]:
            return SPEC["luajitNoGC64"], False
        return f"{name} bytecode", head[3] == 2
    if head[:4] == b"\x1bLua" and len(head) >= 5:
        return f"Lua {head[4] >> 4}.{head[4] & 15} bytecode", False
    return "not bytecode", False


def describe(head: bytes, ascii: bool) -> Optional[str]:
    """What a file whose first bytes are head looks like when it is not a .t7 file in the given
    encoding; None when it starts as such a .t7 file does (or looks like nothing known)."""
    if not head:
        return "an empty file"
    if ascii and _ASCII_START.match(head):
        return None
    binary_start = len(head) >= 4 and 0 <= struct.unpack_from("<i", head)[0] <= _LAST_CODE
    if not ascii and binary_start:
        return None
    for magic, what in _NOT_T7:
        if head.startswith(magic):
            return what
    if not ascii and _ASCII_START.match(head):
        return "an ascii .t7 file (read it in the ascii format)"
    if ascii and binary_start:
        return "a binary .t7 file (read it in the binary format)"
    if not _CONTROL.search(head):
        line = head.split(b"\n", 1)[0][:40].decode("ascii", "replace").replace("\ufffd", "?")
        return f'text (it begins "{line}")'
    return None
