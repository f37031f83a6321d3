"""Lua code run from tests with its result brought back as JSON (lua-cjson's encoding), so tests
compare plain Python values; optionally in a runtime of its own (a worker thread's), for
packages that change global state when required (tds, threads, class)."""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterator

import luabridge
from luabridge.core.runtime import bridge

Runner = Callable[..., Any]


def _call(prelude: str, body: str, args: tuple) -> Any:
    luabridge.require("torch")
    fn = luabridge.eval(f"""function(...)
      local cjson = require 'cjson'
      {prelude}
      local result = (function(...) {body} end)(...)
      return cjson.encode({{ v = result }})
    end""")
    return json.loads(bridge().call(fn, *args)).get("v")


def runner(prelude: str) -> Runner:
    """run(body, *args): body (Lua statements ending in `return value`) after prelude, in this
    thread's runtime; returns the value decoded from JSON (nil -> None)."""
    return lambda body, *args: _call(prelude, body, args)


def fresh_runner(prelude: str) -> Iterator[Runner]:
    """As runner, but every call runs in one worker thread with a runtime of its own (a
    generator for a pytest fixture: the thread stops after the yield)."""
    pool = ThreadPoolExecutor(max_workers=1)
    yield lambda body, *args: pool.submit(_call, prelude, body, args).result()
    pool.shutdown()
