"""torch7's optim from Python: ``luabridge.optim.sgd(feval, x, config)`` calls any optim function
by name, and ``luabridge.optim.ConfusionMatrix(10)`` builds its classes (``require 'optim'`` runs
on first use, in the calling thread's runtime).

``feval`` may be a Python function: it receives x as a tensor proxy and returns ``(loss, grad)``
with grad a numpy array or a tensor proxy; Lua sees a number and a tensor. ``config`` and ``state``
may be dicts: the fields optim adds to them (learning-rate counters, momentum and moment buffers)
are copied back after each call, so passing the same dict again continues the optimisation.
The call returns what optim returns, e.g. ``(x, [loss])`` for ``sgd``.
"""
from __future__ import annotations

from typing import Any

from .core.proxy import Namespace

_optim = Namespace("optim")


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(_optim, name)


def __dir__() -> list[str]:
    return dir(_optim)
