"""luabridge.torch.function: a compiled luabridge graph as a callable on torch tensors.

Each stage of `luabridge.graph.compile` is one torch.autograd.Function: its backward calls the
next stage's closure through another such Function, so the gradient is itself differentiable
(create_graph=True, gradgradcheck) for as many stages as were compiled."""
from __future__ import annotations

from typing import Any, Callable, Sequence, Union

import torch

from ..graph import StageError, Symbol, compile as compile_graph


def function(outputs: Union[Symbol, Sequence[Symbol]], inputs: Union[Symbol, Sequence[Symbol]],
             stages: int = 2) -> Callable[..., Any]:
    """f(*tensors) -> the outputs as tensors (one tensor for a single output), differentiable
    `stages` times (CPU tensors; a placeholder's dtype is the tensor's it takes)."""
    staged = compile_graph(outputs, inputs, stages)
    single = isinstance(outputs, Symbol) and len(outputs.outputs) == 1

    def call(*tensors: torch.Tensor) -> Any:
        for i, t in enumerate(tensors):
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"luabridge.torch.function: input {i} is a {type(t).__name__}, not a tensor")
        outs = _Stage.apply(_Step(staged, len(tensors), stages), *tensors)
        return outs[0] if single else outs
    return call


class _Step:
    """A stage to run: `run` takes the last `arity` leaves (as arrays) and gives the stage's
    results and the next stage's closure."""

    def __init__(self, run: Callable, arity: int, num_stages: int) -> None:
        self.run, self.arity, self.num_stages = run, arity, num_stages


class _Stage(torch.autograd.Function):
    """One stage on torch tensors. Its inputs are every leaf so far (the function's inputs, then
    each earlier stage's gradient inputs), so that the next stage's results (the gradients of
    all of them) are its backward's."""

    @staticmethod
    def forward(ctx: Any, step: _Step, *leaves: torch.Tensor) -> tuple:
        arrays = [t.detach().cpu().numpy() for t in leaves[len(leaves) - step.arity:]]
        results, ctx.next = step.run(*arrays)
        ctx.num_stages = step.num_stages
        ctx.save_for_backward(*leaves)
        return tuple(torch.from_numpy(r) for r in results)

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor) -> tuple:
        if ctx.next is None:
            raise StageError(f"luabridge.torch.function: differentiated past its last stage "
                             f"(compiled for {ctx.num_stages} stages)")
        closure = ctx.next
        step = _Step(lambda *g: closure(*g, retain_graph=True), len(grads), ctx.num_stages)
        return (None, *_Stage.apply(step, *ctx.saved_tensors, *grads))
