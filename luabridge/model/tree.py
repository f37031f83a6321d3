"""The tensors of a Lua module tree, named as PyTorch names them: each parameter with its
gradient, and the buffers (running statistics), at torch7's 1-based container indices
("1.weight", "3.2.bias", "2.running_mean"). Torch-free: luabridge.Model reads its state through
it, and luabridge.torch's LuaModule binds its Parameters and buffers through it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.proxy import LuaObject, Tensor
from ..core.runtime import bridge

# Fields that torch7 modules keep as state across calls without being parameters (batch
# normalization's running statistics); PyTorch names its buffers alike.
BUFFER_FIELDS = ("running_mean", "running_var")


@dataclass(frozen=True)
class Entry:
    path: tuple[str, ...]   # the container indices down to the module holding it ("3", "2")
    field: str              # its field there ("weight", "running_mean")
    tensor: Tensor
    grad: Tensor | None     # the gradient of a parameter; None for a buffer

    @property
    def key(self) -> str:
        """The name PyTorch's state_dict gives it: "3.2.weight"."""
        return ".".join((*self.path, self.field))


def collect(module: LuaObject, path: tuple[str, ...] = ()) -> list[Entry]:
    """The module's own parameters and buffers, then its children's, depth first (the order in
    which torch.nn.Module lists them)."""
    params, grads = module.parameters() or ([], [])
    children = module._lua["modules"]
    fields = _tensor_fields(module)
    same = bridge().lua.globals().rawequal
    entries = []
    for p, g in zip(params, grads):
        field = next((k for k, v in fields if same(v, p._lua)), None)
        if field is not None:
            entries.append(Entry(path, field, p, g))
        elif children is None:
            raise ValueError(f"{module._typename()}: a parameter is in none of its fields (one cannot name it)")
    state = dict(fields)
    entries += [Entry(path, k, Tensor(state[k]), None) for k in BUFFER_FIELDS if k in state]
    if children is not None:
        for i, child in enumerate(module.modules, start=1):
            entries += collect(child, (*path, str(i)))
    return entries


def _tensor_fields(module: LuaObject) -> list[tuple[str, Any]]:
    """(name, Lua tensor) for each string field of module holding a tensor."""
    is_tensor = bridge().lua.globals().torch.isTensor
    return [(k, v) for k, v in module._lua.items() if isinstance(k, str) and is_tensor(v)]
