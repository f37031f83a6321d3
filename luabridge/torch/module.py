"""`LuaModule`: a Lua nn module as a `torch.nn.Module`.

Tensors cross without a copy (numpy views of torch memory become Lua tensors); the Lua weights
are the memory of the torch Parameters, so optimizers step them in place. Outputs and gradInputs
are copied out, because the Lua module reuses those buffers on its next call.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .. import eval as lua_eval
from .. import require, wrap
from ..interop import from_numpy, to_numpy
from ..proxy import LuaObject
from ..runtime import bridge


def _to_lua(x: torch.Tensor) -> Any:
    """A Lua tensor over x's memory (CPU only for now)."""
    if x.device.type != "cpu":
        raise TypeError(f"LuaModule: tensors on {x.device} are not supported yet (CPU only)")
    return from_numpy(x.detach().numpy())


def _from_lua(t: Any) -> torch.Tensor:
    """A torch copy of a Lua tensor (proxy or raw) that the module will overwrite later."""
    return torch.from_numpy(np.array(to_numpy(t)))


def _shared(t: LuaObject) -> torch.nn.Parameter:
    """A Parameter over a Lua tensor's memory."""
    return torch.nn.Parameter(torch.from_numpy(to_numpy(t)))


def _field_of(module: LuaObject, tensor: LuaObject) -> str:
    """The name of the field of module that holds tensor (`weight`, `bias`...)."""
    same = bridge().lua.globals().rawequal
    for key, value in module._lua.items():
        if isinstance(key, str) and same(value, tensor._lua):
            return key
    raise ValueError(f"LuaModule: a parameter of {module._typename()} is in none of its fields")


def _hold(owner: torch.nn.Module, module: LuaObject) -> list[LuaObject]:
    """Registers on owner the Parameters of a Lua module: a container's children as submodules
    named by torch7's 1-based index (so names read `3.2.bias`), a leaf's tensors under their
    field names. Returns the Lua gradient tensors, in Parameter order."""
    if module._lua["modules"] is not None:
        grads = []
        for i, child in enumerate(module.modules, start=1):
            holder = torch.nn.Module()
            grads += _hold(holder, child)
            owner.add_module(str(i), holder)
        return grads
    params, grads = module.parameters() or ([], [])
    for p in params:
        owner.register_parameter(_field_of(module, p), _shared(p))
    return list(grads)


class _LuaFunction(torch.autograd.Function):
    """forward runs the Lua forward; backward its updateGradInput and accGradParameters, whose
    parameter gradients come back to autograd (which adds them to each Parameter's .grad)."""

    @staticmethod
    def forward(ctx: Any, owner: LuaModule, x: torch.Tensor, *params: torch.Tensor) -> torch.Tensor:
        owner._calls += 1
        ctx.owner, ctx.call = owner, owner._calls
        ctx.x = _to_lua(x)
        y = _from_lua(owner.lua.forward(ctx.x))
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> tuple:
        owner = ctx.owner
        try:
            (output,) = ctx.saved_tensors
        except RuntimeError as e:   # freed by the first backward
            raise RuntimeError(f"LuaModule({owner.lua._typename()}): a second backward through the same "
                               "forward; pass retain_graph=True to the first backward, or run forward again") from e
        if ctx.call != owner._calls:
            _restore(ctx, owner, output)
        go = _to_lua(grad_output.contiguous())
        grad_input = _from_lua(owner.lua.updateGradInput(ctx.x, go))
        grads = owner.lua_grads
        for g in grads:
            g.zero()
        owner.lua.accGradParameters(ctx.x, go, 1)
        return (None, grad_input, *(_from_lua(g) for g in grads))


def _restore(ctx: Any, owner: LuaModule, output: torch.Tensor) -> None:
    """The Lua module holds the state of its latest forward only, and another forward came since:
    run this call's forward again, refusing if it gives another output (a random module such as
    Dropout in training, or weights changed in between)."""
    owner._calls += 1
    ctx.call = owner._calls
    again = _from_lua(owner.lua.forward(ctx.x))
    if not torch.equal(again, output):
        raise RuntimeError(f"LuaModule({owner.lua._typename()}): the module ran forward again before "
                           "this backward, and running this call's forward again gives another output "
                           "(a random module?): call backward before the next forward")


class LuaModule(torch.nn.Module):
    """A Lua nn module (a proxy, or a constructor such as ``"nn.Linear(4, 3)"``) as a
    torch.nn.Module: forward takes and returns torch tensors and takes part in autograd; its
    Parameters share memory with the Lua weights, named after the module tree (``"1.weight"``)."""

    def __init__(self, module: LuaObject | str) -> None:
        super().__init__()
        if isinstance(module, str):
            require("nn")
            module = wrap(lua_eval(module))
        if not isinstance(module, LuaObject) or module._lua["updateGradInput"] is None:
            raise TypeError(f"LuaModule expects a Lua nn module or its constructor string, got {module!r}")
        self.lua = module
        self._calls = 0
        self.lua_grads = _hold(self, module)
        self.train(module._lua["train"] is not False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"LuaModule.forward takes a torch tensor (table inputs are not supported yet), "
                            f"got {type(x).__name__}")
        params = list(self.parameters())
        if params and params[0].dtype != x.dtype:
            raise TypeError(f"LuaModule({self.lua._typename()}): input is {x.dtype} but the module's "
                            f"parameters are {params[0].dtype}")
        return _LuaFunction.apply(self, x, *params)

    def train(self, mode: bool = True) -> LuaModule:
        super().train(mode)
        (self.lua.training if mode else self.lua.evaluate)()
        return self

    def extra_repr(self) -> str:
        return str(self.lua)
