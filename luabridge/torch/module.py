"""`LuaModule`: a Lua nn module as a `torch.nn.Module`.

Tensors cross without a copy (Lua tensors over torch memory); the Lua weights and running
statistics are the memory of the torch Parameters and buffers, so optimizers and
load_state_dict write into them. Outputs and gradients are copied out of cached views, because
the Lua module reuses those buffers on its next call. One Lua call per forward, one per backward
(lua/luabridge/luamodule.lua).
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

import torch

from .. import eval as lua_eval
from .. import require, to_numpy, wrap
from ..proxy import LuaObject
from ..runtime import bridge
from .crossing import Spec, Views, flatten, lua_value, type_name, unflatten
from .tree import collect


class _LuaFunction(torch.autograd.Function):
    """forward runs the Lua forward; backward its updateGradInput and, when a Parameter needs
    it, accGradParameters, whose gradients go back to autograd (which adds them to .grad)."""

    @staticmethod
    def forward(ctx: Any, owner: LuaModule, spec: Spec, *tensors: torch.Tensor) -> tuple:
        ctx.owner, ctx.spec, ctx.n = owner, spec, len(tensors) - len(owner._params)
        ctx.input = owner._lua_value(tensors[:ctx.n], spec)
        outputs = owner._run_forward(ctx)
        ctx.save_for_backward(*outputs)
        return outputs

    @staticmethod
    def backward(ctx: Any, *grad_outputs: torch.Tensor) -> tuple:
        owner = ctx.owner
        try:
            outputs = ctx.saved_tensors
        except RuntimeError as e:   # freed by the first backward
            raise RuntimeError(f"LuaModule({owner.lua._typename()}): a second backward through the same "
                               "forward; pass retain_graph=True to the first backward, or run forward again") from e
        if ctx.call != owner._calls:
            _restore(ctx, owner, outputs)
        needs = ctx.needs_input_grad
        grad_output = owner._lua_value(tuple(g.contiguous() for g in grad_outputs), ctx.out_spec)
        grad_input, grads = owner._run_backward(ctx.input, grad_output, any(needs[2 + ctx.n:]))
        grad_input = _match(grad_input, ctx, owner)
        return (None, None, *(g if need else None for g, need in zip(grad_input, needs[2:])), *grads)


def _match(grad_input: tuple | None, ctx: Any, owner: LuaModule) -> tuple:
    """The input gradients in input order: the gradInput's leaves when it has the input's shape."""
    if grad_input is None:
        return (None,) * ctx.n
    if owner._grad_input.spec != ctx.spec:
        raise RuntimeError(f"LuaModule({owner.lua._typename()}): gradInput has the shape "
                           f"{_shape(owner._grad_input.spec)} but the input {_shape(ctx.spec)}")
    return grad_input


def _shape(spec: Spec) -> str:
    """A spec as a reader sees it: 'tensor' or nested brackets ([tensor, [tensor, tensor]])."""
    return "tensor" if spec is None else "[" + ", ".join(_shape(s) for s in spec) + "]"


def _restore(ctx: Any, owner: LuaModule, outputs: tuple) -> None:
    """The Lua module holds the state of its latest forward only, and another forward came since:
    run this call's forward again, refusing if it gives another output (a random module such as
    Dropout in training, or weights changed in between)."""
    again = owner._run_forward(ctx)
    if not all(torch.equal(a, b) for a, b in zip(again, outputs)):
        raise RuntimeError(f"LuaModule({owner.lua._typename()}): the module ran forward again before "
                           "this backward, and running this call's forward again gives another output "
                           "(a random module?): call backward before the next forward")


class LuaModule(torch.nn.Module):
    """A Lua nn module (a proxy, or a constructor such as ``"nn.Linear(4, 3)"``) as a
    torch.nn.Module: forward takes and returns torch tensors (nested lists for Lua tables) and
    takes part in autograd; its Parameters and buffers share memory with the Lua tensors, named
    after the module tree (``"1.weight"``, ``"2.running_mean"``)."""

    def __init__(self, module: LuaObject | str) -> None:
        super().__init__()
        if isinstance(module, str):
            require("nn")
            module = wrap(lua_eval(module))
        if not isinstance(module, LuaObject) or module._lua["updateGradInput"] is None:
            raise TypeError(f"LuaModule expects a Lua nn module or its constructor string, got {module!r}")
        b = bridge()
        self.lua = module
        self._bridge = b
        self._helpers = b.call(b.lua.globals().require, "luabridge.luamodule")
        self._make = self._helpers.tensor
        self._calls = 0
        self._dtype: torch.dtype | None = None
        self._bind()
        self.train(module._lua["train"] is not False)

    # -- binding the Lua tensors ---------------------------------------------------------------

    def _bind(self) -> None:
        """(Re)binds the Parameters and buffers to the Lua module's tensors, keeping each
        Parameter object (an optimizer holding it goes on working) and its .grad."""
        grads: dict[int, Any] = {}
        by_memory: dict[tuple, torch.nn.Parameter] = {}
        for e in collect(self.lua):
            holder = self._holder(e.path)
            view = torch.from_numpy(to_numpy(e.tensor))
            if e.grad is None:
                holder.register_buffer(e.field, view)
                continue
            key = (view.data_ptr(), view.shape, view.stride(), view.dtype)
            param = by_memory.get(key)
            if param is None:
                param = by_memory[key] = _rebound(holder._parameters.get(e.field), view)
                grads[id(param)] = e.grad
            elif to_numpy(grads[id(param)]).ctypes.data != to_numpy(e.grad).ctypes.data:
                raise ValueError(f"LuaModule: {'.'.join((*e.path, e.field))} shares its weight with another "
                                 "module but not its gradient (share both, as clone('weight', 'gradWeight'))")
            holder.register_parameter(e.field, param)
        self._params = tuple(self.parameters())
        floating = [t for t in (*self._params, *self.buffers()) if t.is_floating_point()]
        self._dtype = floating[0].dtype if floating else self._dtype
        lua_grads = self._bridge.lua.table_from([grads[id(p)]._lua for p in self._params])
        self._state = self._helpers.state(self.lua._lua, lua_grads)
        self._output, self._grad_input, self._grads = Views(), Views(), Views()

    def _holder(self, path: tuple[str, ...]) -> torch.nn.Module:
        """The submodule standing for the Lua container at path, made on first use."""
        holder: torch.nn.Module = self
        for part in path:
            if part not in holder._modules:
                holder.add_module(part, torch.nn.Module())
            holder = holder._modules[part]
        return holder

    # -- calls ---------------------------------------------------------------------------------

    def forward(self, x: Any) -> Any:
        leaves: list[torch.Tensor] = []
        spec = flatten(x, leaves)
        for leaf in leaves:
            if leaf.dtype != self._dtype and leaf.is_floating_point() and self._dtype is not None:
                raise TypeError(f"LuaModule({self.lua._typename()}): input is {leaf.dtype} but the module's "
                                f"tensors are {self._dtype} (convert one of them: .to(dtype))")
        outputs = _LuaFunction.apply(self, spec, *leaves, *self._params)
        return unflatten(outputs, self._output.spec)

    def _lua_value(self, leaves: tuple, spec: Spec) -> Any:
        return lua_value(self._bridge, self._make, leaves, spec)

    def _run_forward(self, ctx: Any) -> tuple:
        """The Lua forward of ctx.input: copies of its output tensors, ctx.out_spec their shape."""
        self._calls += 1
        ctx.call = self._calls
        output, moved = self._bridge.call(self._helpers.forward, self._state, ctx.input)
        self._output.update(output, moved, "output")
        ctx.out_spec = self._output.spec
        return self._output.copies()

    def _run_backward(self, lua_input: Any, grad_output: Any, params: bool) -> tuple:
        """updateGradInput (and accGradParameters with params): copies of the input gradients
        (None when the Lua gradInput is nil) and of the parameters' gradients (Nones without)."""
        grad_input, moved, grads_moved = self._bridge.call(
            self._helpers.backward, self._state, lua_input, grad_output, params)
        if params:
            self._grads.update(self._state.grads, grads_moved, "gradient")
        grads = self._grads.copies() if params else (None,) * len(self._params)
        if grad_input is None:
            return None, grads
        self._grad_input.update(grad_input, moved, "gradInput")
        return self._grad_input.copies(), grads

    # -- torch.nn.Module behaviour -------------------------------------------------------------

    def train(self, mode: bool = True) -> LuaModule:
        super().train(mode)
        (self.lua.training if mode else self.lua.evaluate)()
        return self

    def _apply(self, fn: Callable, recurse: bool = True) -> LuaModule:
        """What .double(), .float(), .to(dtype), .type(...) do: converts the Lua module (its
        :type()) and rebinds the Parameters and buffers to its new tensors."""
        current = self._dtype or torch.float64
        probe = fn(torch.empty(0, dtype=current))
        _check_device(self, probe.device)
        if probe.dtype != self._dtype:
            self.lua.type(f"torch.{type_name(probe.dtype)}Tensor")
            self._dtype = probe.dtype
            self._bind()
        return self

    def to(self, *args: Any, **kwargs: Any) -> LuaModule:
        device = torch._C._nn._parse_to(*args, **kwargs)[0]
        if device is not None:
            _check_device(self, device)
        return super().to(*args, **kwargs)

    def cuda(self, device: Any = None) -> LuaModule:
        _check_device(self, torch.device("cuda"))
        return self

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False) -> Any:
        """PyTorch's, which copies into the Parameters and buffers, so into the Lua tensors."""
        if assign:
            raise ValueError("LuaModule.load_state_dict: assign=True would part the Parameters from the Lua "
                             "module's tensors; load without it (the values are copied into them)")
        return super().load_state_dict(state_dict, strict=strict)

    def extra_repr(self) -> str:
        return str(self.lua)


def _rebound(param: torch.nn.Parameter | None, view: torch.Tensor) -> torch.nn.Parameter:
    """A Parameter over view: param itself when there is one (its .grad converted to view's dtype)."""
    if param is None:
        return torch.nn.Parameter(view)
    grad, param.grad = param.grad, None
    param.data = view
    if grad is not None:
        param.grad = grad.to(view.dtype)
    return param


def _check_device(owner: LuaModule, device: torch.device) -> None:
    if torch.device(device).type != "cpu":
        raise RuntimeError(f"LuaModule({owner.lua._typename()}) runs on the CPU: its Lua module cannot use "
                           f"PyTorch's {device} tensors (luabridge's CUDA tensors are CuPy arrays)")
