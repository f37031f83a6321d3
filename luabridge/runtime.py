"""One LuaJIT runtime per thread, with luabridge's Lua tree on package.path."""
from __future__ import annotations

import codecs
import os
import threading
from pathlib import Path
from typing import Any

from lupa import luajit21

from .errors import FOREIGN_OBJECT, LuaError
from .memory import BufferRegistry
from .paths import lua_dir


# Lua strings are bytes. They cross to Python as UTF-8 text, with any byte that is not UTF-8 kept
# as a surrogate escape (as os.fsdecode does) so that reading never fails and the same bytes go
# back to Lua.
STRING_ENCODING = "luabridge-utf-8"


def _find_codec(name: str) -> codecs.CodecInfo | None:
    if name.replace("_", "-") != STRING_ENCODING:
        return None
    return codecs.CodecInfo(name=STRING_ENCODING,
                            encode=lambda s, errors="strict": codecs.utf_8_encode(s, "surrogateescape"),
                            decode=lambda b, errors="strict": codecs.utf_8_decode(b, "surrogateescape", True))


codecs.register(_find_codec)
_thread = threading.local()
_LUPA_FOREIGN = "cannot mix objects from different Lua runtimes"  # lupa's refusal
_extra_paths: list[str] = []


class _ForeignObjectsNamed:
    """`with foreign_objects_named:` turns lupa's refusal of another runtime's object into the
    LuaError that says why. A class, not a generator: it wraps hot calls, and costs a fraction of
    contextlib's microseconds."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, error: Any, tb: Any) -> bool:
        if kind is luajit21.LuaError and _LUPA_FOREIGN in str(error):
            raise LuaError(FOREIGN_OBJECT) from None
        return False


foreign_objects_named = _ForeignObjectsNamed()

_BOOT = r"""
local py, lua_dirs, library = ...
rawset(_G, '__luabridge_py', py)
local parts = {}
for dir in lua_dirs:gmatch('[^;]+') do
  parts[#parts + 1] = dir .. '/?.lua;' .. dir .. '/?/init.lua'
end
package.path = table.concat(parts, ';') .. ';' .. package.path

local protected
local library_source = '@' .. library .. '/'
local full_traceback = os.getenv('LUABRIDGE_FULL_TRACEBACK') == '1'

-- 'user' (the caller's own Lua), 'C' (a named C function) or 'hidden': luabridge's Lua library
-- (torch7's C core, written in Lua here), LuaJIT's unnamed builtins (dofile's frame).
local function frame_kind(info)
  if info.what == 'C' then return info.namewhat ~= '' and 'C' or 'hidden' end
  if info.source:sub(1, #library_source) == library_source then return 'hidden' end
  return 'user'
end

local function frame_line(info)
  local where = info.what == 'C' and '[C]' or info.short_src
  if info.currentline > 0 then where = where .. ':' .. info.currentline end
  if info.what == 'main' then return where .. ': in main chunk' end
  if info.namewhat ~= '' then return where .. ": in function '" .. info.name .. "'" end
  return where .. ': in function <' .. info.short_src .. ':' .. info.linedefined .. '>'
end

-- The traceback of the user's frames, from `level` down to the call Python made: a C function
-- stays only between two user frames (require, pcall), long stacks keep their two ends.
local function user_traceback(level)
  local frames = {}
  while true do
    local info = debug.getinfo(level, 'Slnf')
    if not info or info.func == protected then break end
    frames[#frames + 1] = { kind = frame_kind(info), info = info }
    level = level + 1
  end
  local lines, lastUser = {}, nil
  for i, frame in ipairs(frames) do
    if frame.kind == 'user' then
      lastUser = i
    elseif frame.kind == 'C' and lastUser then
      local outer = frames[i + 1]
      if not (outer and outer.kind == 'user') then frame.kind = 'hidden' end
    else
      frame.kind = 'hidden'
    end
    if frame.kind ~= 'hidden' then lines[#lines + 1] = '\t' .. frame_line(frame.info) end
  end
  if #lines == 0 then return '' end
  if #lines > 22 then
    local tail = { unpack(lines, #lines - 9) }
    lines = { unpack(lines, 1, 12) }
    lines[13] = '\t...'
    for _, line in ipairs(tail) do lines[#lines + 1] = line end
  end
  return 'stack traceback:\n' .. table.concat(lines, '\n')
end

-- Calls f(...) and returns true, results... or false, message, traceback.
function protected(f, ...)
  local tb
  local function handler(e)
    -- walking the frames in Lua needs more stack than an overflow leaves: then the whole stack
    local overflow = type(e) == 'string' and e:find('stack overflow', 1, true)
    tb = (full_traceback or overflow) and debug.traceback('', 2) or user_traceback(3)
    return e
  end
  local r = { xpcall(f, handler, ...) }
  if r[1] then return unpack(r, 1, table.maxn(r)) end
  local e = r[2]
  if type(e) ~= 'string' then
    local ok, s = pcall(tostring, e)
    e = ok and s or '(error object is not a string)'
  end
  -- an error blaming its caller names this wrapper when Python made the call: drop that place
  e = e:gsub('^%[string "<python>"%]:%d+: ', '')
  return false, e, tb
end
rawset(_G, '__luabridge_protected', protected)
rawset(_G, '__luabridge_kind', function(x)
  local mt = getmetatable(x)
  if type(mt) ~= 'table' then return 'table' end
  if rawget(mt, '__tensor') then return 'tensor' end
  if rawget(mt, '__storage') then return 'storage' end
  if rawget(mt, '__typename') then return 'object' end
  return 'table'
end)
return protected
"""


class Bridge:
    """A thread's Lua runtime together with the Python state its Lua side calls back into."""

    def __init__(self) -> None:
        self.lua = luajit21.LuaRuntime(unpack_returned_tuples=True, encoding=STRING_ENCODING)
        self.buffers = BufferRegistry()
        from . import pyside  # the functions Lua calls back

        dirs = [str(lua_dir()), *_extra_paths]
        self._protected = self.lua.execute(_BOOT, pyside.table_for(self), ";".join(dirs), dirs[0])
        self._lua_type = self.lua.globals().type
        env_path = os.environ.get("LUA_PATH")
        if env_path:
            self.lua.globals().package.path = self.lua.globals().package.path + ";" + env_path

    def call(self, fn: Any, *args: Any) -> Any:
        """Calls a Lua function, turning a Lua error into LuaError with its traceback."""
        with foreign_objects_named:
            result = self._protected(fn, *args)
        if not isinstance(result, tuple):  # true alone: the function returned nothing
            return None
        if result[0] is False:
            raise LuaError(str(result[1]), str(result[2] or ""))
        rest = result[1:]
        return rest[0] if len(rest) == 1 else rest

    def check_owned(self, obj: Any) -> None:
        """Raises LuaError for an object of another thread's runtime: its fields would be read
        against this runtime's buffers, which are not the ones it points into."""
        try:
            self._lua_type(obj)
        except luajit21.LuaError:
            raise LuaError(FOREIGN_OBJECT) from None

    def load(self, code: str, chunkname: str) -> Any:
        return _loaded(self.lua.globals().loadstring(code, chunkname))


def _loaded(result: Any) -> Any:
    """The function from loadstring/loadfile, or LuaError with the syntax message."""
    if isinstance(result, tuple):
        raise LuaError(str(result[1]))
    return result


def bridge() -> Bridge:
    b = getattr(_thread, "bridge", None)
    if b is None:
        b = _thread.bridge = Bridge()
    return b


def runtime() -> luajit21.LuaRuntime:
    """The calling thread's LuaJIT runtime, created on first use."""
    return bridge().lua


def add_lua_path(directory: str | os.PathLike) -> None:
    """Adds a directory to package.path (for this thread's runtime and any created later)."""
    d = str(Path(directory).resolve())
    if d not in _extra_paths:
        _extra_paths.append(d)
    b = getattr(_thread, "bridge", None)
    if b is not None:
        g = b.lua.globals()
        g.package.path = f"{d}/?.lua;{d}/?/init.lua;" + g.package.path


def execute(code: str) -> Any:
    """Runs a chunk of Lua; returns what it returns."""
    b = bridge()
    return b.call(b.load(code, "=(execute)"))


def eval(expr: str) -> Any:  # noqa: A001 - mirrors lupa's name
    """Evaluates a Lua expression."""
    b = bridge()
    return b.call(b.load("return " + expr, "=(eval)"))


def dofile(path: str | os.PathLike) -> Any:
    """Runs a Lua file; errors carry the file name and line."""
    b = bridge()
    return b.call(_loaded(b.lua.globals().loadfile(str(path))))


def require(name: str) -> Any:
    """Lua's require: loads a module once and returns it."""
    b = bridge()
    return b.call(b.lua.globals().require, name)
