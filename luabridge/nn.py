"""torch7's nn from Python: ``luabridge.nn.Linear(784, 10)`` builds any nn class by name (Lua's
``require 'nn'`` runs on first use, in the calling thread's runtime).

Modules come back as proxies: ``m.forward(x)`` calls ``m:forward(x)``, ``m.weight`` reads a field,
``m(x)`` is ``m:__call__(x)``, ``str(m)`` is torch7's printout, and methods returning the module
(``nn.Sequential().add(a).add(b)``) return the same proxy. Arguments may be numpy arrays (shared
with Lua without a copy: a float64 array is a DoubleTensor, float32 a FloatTensor), tensor proxies,
numbers, lists or tuples (Lua arrays, e.g. a table of tensors), dicts (Lua tables) and Python
functions. Tensors come back as `luabridge.Tensor` proxies that numpy reads without a copy
(``np.asarray(out)``); Lua tables come back as lists or dicts.

As in torch7, a module's ``output`` and ``gradInput`` are buffers reused by the next call:
``out = m.forward(x)`` shares memory with ``m.output``, so the next ``m.forward`` overwrites it.
Copy what must outlive the next call (``np.array(out)``).
"""
from __future__ import annotations

from typing import Any

from .core.proxy import Namespace

_nn = Namespace("nn")


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(_nn, name)


def __dir__() -> list[str]:
    return dir(_nn)
