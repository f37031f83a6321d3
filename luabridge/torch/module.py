"""`LuaModule`: a Lua nn module as a `torch.nn.Module`.

Tensors cross without a copy (Lua tensors over torch memory); the Lua weights and running
statistics are the memory of the torch Parameters and buffers, so optimizers and
load_state_dict write into them. Outputs and gradients are copied out of cached views, because
the Lua module reuses those buffers on its next call. One Lua call per forward, one per backward
(lua/luabridge/torch/module.lua); a forward with nothing for autograd to record (no_grad, or no
tensor needing a gradient) runs without an autograd.Function.
"""
from __future__ import annotations

import os
from typing import Any, Callable

import torch

from ..core.proxy import LuaObject, to_numpy, wrap
from ..core.runtime import STRING_ENCODING, bridge, require
from ..model.tree import collect
from ..t7.load import read_t7
from .crossing import Lent, Spec, Staging, Views, flatten, table_args, type_name, unflatten
from .given import module_value


class _LuaFunction(torch.autograd.Function):
    """forward runs the Lua forward; backward its updateGradInput and, when a Parameter needs
    it, accGradParameters, whose gradients go back to autograd (which adds them to .grad)."""

    @staticmethod
    def forward(ctx: Any, owner: LuaModule, spec: Spec, *tensors: torch.Tensor) -> tuple:
        ctx.owner, ctx.spec, ctx.n = owner, spec, len(tensors) - len(owner._params)
        ctx.input, outputs = owner._forward(tensors[:ctx.n], spec)
        ctx.call, ctx.out_spec = owner._calls.latest, owner._output.spec
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
        if ctx.call != owner._calls.latest:
            _restore(ctx, owner, outputs)
        needs = ctx.needs_input_grad[2:]
        grad_output = owner._staging.args(owner._bridge, owner._make, grad_outputs, ctx.out_spec)
        return (None, None, *owner._run_backward(ctx, grad_output, needs[:ctx.n], needs[ctx.n:]))


# Function.apply's C++ half, bound to _LuaFunction: the Python half adds only functorch's
# unwrapping (about 2 us a call), which matters while a functorch transform (vmap, grad) runs.
_apply_in_c = super(torch.autograd.Function, _LuaFunction).apply


def _shape(spec: Spec) -> str:
    """A spec as a reader sees it: 'tensor' or nested brackets ([tensor, [tensor, tensor]])."""
    return "tensor" if spec is None else "[" + ", ".join(_shape(s) for s in spec) + "]"


def _restore(ctx: Any, owner: LuaModule, outputs: tuple) -> None:
    """The Lua module holds the state of its latest forward only, and another forward came since:
    run this call's forward again, refusing if it gives another output (a random module such as
    Dropout in training, or weights changed in between)."""
    _, again = owner._run_forward((ctx.input,))
    ctx.call = owner._calls.latest
    if not all(torch.equal(a, b) for a, b in zip(again, outputs)):
        raise RuntimeError(f"LuaModule({owner.lua._typename()}): the module ran forward again before "
                           "this backward, and running this call's forward again gives another output "
                           "(a random module?): call backward before the next forward")


class _Calls:
    """The number of the latest forward (a plain attribute: torch.nn.Module's setattr is slow)."""

    __slots__ = ("latest",)

    def __init__(self) -> None:
        self.latest = 0


class LuaModule(torch.nn.Module):
    """A Lua nn module (a proxy, a constructor such as ``"nn.Linear(4, 3)"``, or a .t7 file: a
    `pathlib.Path` or the name of an existing file) as a torch.nn.Module: forward takes and returns torch tensors (nested lists for Lua tables) and
    takes part in autograd; its Parameters and buffers share memory with the Lua tensors, named
    after the module tree (``"1.weight"``, ``"2.running_mean"``)."""

    def __init__(self, module: LuaObject | str | os.PathLike) -> None:
        super().__init__()
        module, _ = module_value(module, "LuaModule")
        if not isinstance(module, LuaObject) or module._lua["updateGradInput"] is None:
            raise TypeError(f"LuaModule expects a Lua nn module or its constructor string (or a .t7 file holding "
                            f"one), got {module!r}")
        b = bridge()
        self.lua = module
        self._bridge = b
        helpers = b.module("luabridge.torch.module")
        self._make, self._new_state = helpers.tensor, helpers.state
        self._lua_forward, self._lua_backward = helpers.forward, helpers.backward
        self._calls = _Calls()
        self._dtype: torch.dtype | None = None
        self._bind()
        self.register_load_state_dict_post_hook(_reshare)
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
        self._state = self._new_state(self.lua._lua, lua_grads)
        self._lua_grads = lua_grads
        self._output, self._grad_input, self._grads = Views(), Views(), Views()
        self._staging = Staging()
        self._lent = Lent()

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
        if isinstance(x, torch.Tensor):   # the usual lone tensor, without flatten's walk
            leaves.append(x)
            spec: Spec = None
        else:
            spec = flatten(x, leaves)
        dtype = self._dtype
        for leaf in leaves:
            if leaf.dtype != dtype and leaf.is_floating_point() and dtype is not None:
                raise TypeError(f"LuaModule({self.lua._typename()}): input is {leaf.dtype} but the module's "
                                f"tensors are {dtype} (convert one of them: .to(dtype))")
        params = self._params
        if torch.is_grad_enabled() and (any([t.requires_grad for t in leaves])
                                        or any([p.requires_grad for p in params])):
            apply = _LuaFunction.apply if torch._C._are_functorch_transforms_active() else _apply_in_c
            outputs = apply(self, spec, *leaves, *params)
        else:   # nothing for autograd to record: no Function, no ctx, no saved outputs
            outputs = self._forward(leaves, spec)[1]
        out_spec = self._output.spec
        return outputs[0] if out_spec is None else unflatten(outputs, out_spec)

    def _forward(self, leaves: tuple | list, spec: Spec) -> tuple[Any, tuple]:
        """The Lua forward of leaves laid out as spec: the Lua input and copies of the outputs."""
        if spec is None:   # a lone tensor: lent again without a new storage when it comes again
            result = self._run_forward(self._lent.args(self._bridge, leaves[0]))
            self._lent.kept()
            return result
        return self._run_forward(table_args(self._bridge, self._make, leaves, spec))

    def _run_forward(self, input_args: tuple) -> tuple[Any, tuple]:
        """The Lua forward of the input that input_args stand for (see lua/luabridge/torch/module.lua M.forward):
        the Lua input and copies of the output tensors (self._output.spec: the output's shape)."""
        self._calls.latest += 1
        lua_input, output, moved = self._bridge.call(self._lua_forward, self._state, *input_args)
        return lua_input, self._output.copies(None, output, moved, "output")

    def _run_backward(self, ctx: Any, grad_output: tuple, input_needs: tuple, param_needs: tuple) -> tuple:
        """updateGradInput (and accGradParameters when a Parameter needs its gradient): copies of
        the gradients that autograd needs, in input then Parameter order, None for the others."""
        params = any(param_needs)
        grad_input, moved, grads_moved = self._bridge.call(
            self._lua_backward, self._state, ctx.input, params, *grad_output)
        grads = self._grads.copies(param_needs, self._lua_grads, grads_moved, "gradient") if params \
            else (None,) * len(param_needs)
        if grad_input is None:   # a module whose gradInput is nil (torch7's way to skip it)
            return (None,) * ctx.n + grads
        inputs = self._grad_input.copies(input_needs, grad_input, moved, "gradInput")
        if self._grad_input.spec != ctx.spec:
            raise RuntimeError(f"LuaModule({self.lua._typename()}): gradInput has the shape "
                               f"{_shape(self._grad_input.spec)} but the input {_shape(ctx.spec)}")
        return inputs + grads

    # -- torch.nn.Module behaviour -------------------------------------------------------------

    def train(self, mode: bool = True) -> LuaModule:
        super().train(mode)
        (self.lua.training if mode else self.lua.evaluate)()
        return self

    def _apply(self, fn: Callable, recurse: bool = True) -> LuaModule:
        """What .double(), .float(), .to(dtype), .type(...) do: converts the Lua module (its
        :type()) and rebinds the Parameters and buffers to its new tensors."""
        current = self._dtype or torch.float64
        try:   # what fn does to an empty tensor of the module's dtype tells the target
            probe = fn(torch.empty(0, dtype=current))
        except (RuntimeError, AssertionError) as e:   # a device this PyTorch lacks (a parent's .cuda())
            raise RuntimeError(f"LuaModule({self.lua._typename()}) runs on the CPU, and moving it failed: {e}") from e
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

    def __deepcopy__(self, memo: dict) -> LuaModule:
        """A LuaModule over a clone of the Lua module (its weights and buffers copied, in Lua)."""
        twin = memo[id(self)] = LuaModule(self.lua.clone())
        return twin.train(self.training)

    def __reduce__(self) -> tuple:
        """Pickles as the Lua module's torch7 bytes (torch.serialize); unpickling deserializes them
        in the runtime of the thread that unpickles, which must know its custom classes."""
        b = self._bridge
        data = b.call(b.lua.globals().torch.serialize, self.lua._lua, "binary")
        return _unpickle, (data.encode(STRING_ENCODING) if isinstance(data, str) else data, self.training)

    def extra_repr(self) -> str:
        return str(self.lua)


def _unpickle(data: bytes, training: bool) -> LuaModule:
    """The LuaModule that __reduce__ pickled. Its bytes are read as a file's are (read_t7): Lua
    functions are refused, since the pickled bytes may come from anywhere."""
    require("nn")
    return LuaModule(wrap(read_t7(data))).train(training)


def _rebound(param: torch.nn.Parameter | None, view: torch.Tensor) -> torch.nn.Parameter:
    """A Parameter over view: param itself when there is one (its .grad converted to view's dtype)."""
    if param is None:
        return torch.nn.Parameter(view)
    grad, param.grad = param.grad, None
    param.data = view
    if grad is not None:
        param.grad = grad.to(view.dtype)
    return param


def _reshare(owner: LuaModule, incompatible_keys: Any) -> None:
    """After load_state_dict: a plain load copied into the Lua tensors already; one with
    assign=True put the loaded tensors in their place, so copy those into the Lua tensors and
    bind the Parameters and buffers to them again."""
    moved = False
    for e in collect(owner.lua):
        holder = owner._holder(e.path)
        loaded = (holder._buffers if e.grad is None else holder._parameters)[e.field]
        lua = torch.from_numpy(to_numpy(e.tensor))
        if loaded.data_ptr() != lua.data_ptr():
            with torch.no_grad():
                lua.copy_(loaded)
            moved = True
    if moved:
        owner._bind()


def _check_device(owner: LuaModule, device: torch.device) -> None:
    if torch.device(device).type != "cpu":
        raise RuntimeError(f"LuaModule({owner.lua._typename()}) runs on the CPU: its Lua module cannot use "
                           f"PyTorch's {device} tensors (luabridge's CUDA tensors are CuPy arrays)")
