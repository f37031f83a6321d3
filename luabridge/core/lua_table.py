"""Lua table constructors read without running Lua: the spec files that Lua and Python share
(lua/torch/elementtypes.lua, lua/torch/t7format.lua) are one `return {...}` of numbers, strings
and nested tables."""
from __future__ import annotations

import re
from typing import Any

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
            raise ValueError(f"Lua table: unsupported escape \\{e}")
        return _ESCAPES[e]
    return _ESCAPE.sub(one, body).encode("latin-1")


def _tokens(text: str) -> list[tuple[str, Any]]:
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ValueError(f"Lua table: cannot parse {text[pos:pos + 20]!r}")
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
        raise ValueError("Lua table: expected 'return {'")
    value, end = _value(tokens, 1)
    if end != len(tokens):
        raise ValueError("Lua table: text after the table")
    return value


def _value(tokens: list, i: int) -> tuple[Any, int]:
    kind, text = tokens[i]
    if kind == "value":
        return text, i + 1
    if text != "{":
        raise ValueError(f"Lua table: unexpected {text!r}")
    fields: dict = {}
    i, n, named = i + 1, 0, False
    while tokens[i] != ("sym", "}"):
        if tokens[i][0] == "name" and tokens[i + 1] == ("sym", "="):
            key, i, named = tokens[i][1], i + 2, True
        elif tokens[i] == ("sym", "["):
            key, i = _value(tokens, i + 1)
            if tokens[i:i + 2] != [("sym", "]"), ("sym", "=")]:
                raise ValueError("Lua table: expected '] ='")
            i, named = i + 2, True
        else:
            n += 1
            key = n
        fields[key], i = _value(tokens, i)
        if tokens[i] in (("sym", ","), ("sym", ";")):
            i += 1
    return (fields if named else list(fields.values())), i + 1


