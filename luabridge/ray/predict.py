"""luabridge.ray.Predictor: a Lua model as a Ray Data batch UDF (one model per actor)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np
import ray
from ray.exceptions import UserCodeException

from ..core.errors import LuaError
from ._worker import use_assigned_cpus

if TYPE_CHECKING:
    from ..model.handle import Model

Names = str | Sequence[str]


class WorkerLuaError(LuaError, UserCodeException):
    """A Lua error in a Predictor: a LuaError for the user, and for Ray Data an error of user
    code (so that it reports it as such rather than as a bug of Ray's)."""


class Predictor:
    """For ``dataset.map_batches(Predictor, fn_constructor_kwargs={"model": m}, ...)`` with
    ``batch_format="numpy"``: each call runs ``model.predict`` on the `input` column (a tuple of
    names: a Lua table of those columns) and returns the batch with the input column(s) replaced
    by the `output` column; other columns pass through. A model returning a table gives one
    column per entry: the names in `output` when it is a tuple, else ``output_1``..``output_k``.
    `batch_size` splits each batch into chunks of that many rows for predict (bounds the
    memory of one forward); None predicts the whole batch at once. BLAS threads are set to the
    CPUs Ray gives the actor."""

    def __init__(self, model: "Model", batch_size: int | None = None, input: Names = "input",
                 output: Names = "output") -> None:
        if batch_size is not None and (not isinstance(batch_size, int) or batch_size < 1):
            raise ValueError(f"Predictor: batch_size must be a positive integer or None, got {batch_size!r}")
        self.model = model
        self.batch_size = batch_size
        self.input = input
        self.output = output

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        try:
            # Ray Data calls this on a thread of its own, whose Lua runtime is not __init__'s
            use_assigned_cpus()
            x = _columns(batch, self.input)
            outputs = _concatenated([self._predict(c) for c in _chunks(x, self.batch_size)])
        except LuaError as e:
            # Ray Data wraps a UDF's error into its own unless the task's context says not to;
            # that context is this task's copy, so only this Predictor's error goes out as is
            ray.data.DataContext.get_current().raise_original_map_exception = True
            raise WorkerLuaError(e.message, e.traceback) from None
        rows = _rows(x)
        names = self._output_names(len(outputs))
        kept = {k: v for k, v in batch.items() if k not in _name_list(self.input)}
        for name, out in zip(names, outputs):
            if len(out) != rows:
                raise ValueError(f"Predictor: the model's output {name!r} has {len(out)} rows "
                                 f"for a batch of {rows}")
            kept[name] = out
        return kept

    def _predict(self, x: np.ndarray | tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
        out = self.model.predict(x)
        outputs = out if isinstance(out, tuple) else (out,)
        if _rows(x) == 1:
            # torch7 modules often take one row for one sample (nn.View without setNumInputDims)
            # and drop the batch dimension: the last chunk of a dataset may be that row
            outputs = tuple(o if len(o) == 1 else o[None] for o in outputs)
        return outputs

    def _output_names(self, count: int) -> list[str]:
        if isinstance(self.output, str):
            return [self.output] if count == 1 else [f"{self.output}_{i}" for i in range(1, count + 1)]
        names = list(self.output)
        if len(names) != count:
            raise ValueError(f"Predictor: output names {names} for a model returning {count} "
                             f"output{'s' if count != 1 else ''}")
        return names


def _name_list(names: Names) -> list[str]:
    return [names] if isinstance(names, str) else list(names)


def _columns(batch: dict[str, np.ndarray], names: Names) -> np.ndarray | tuple[np.ndarray, ...]:
    missing = [n for n in _name_list(names) if n not in batch]
    if missing:
        raise KeyError(f"Predictor: no column {missing[0]!r} in the batch (columns: {sorted(batch)})")
    if isinstance(names, str):
        return batch[names]
    return tuple(batch[n] for n in names)


def _rows(x: np.ndarray | tuple[np.ndarray, ...]) -> int:
    return len(x[0] if isinstance(x, tuple) else x)


def _chunks(x: np.ndarray | tuple[np.ndarray, ...], size: int | None) -> list:
    """x in pieces of `size` rows (every array of a tuple cut alike); [x] when size is None."""
    rows = _rows(x)
    if size is None or size >= rows:
        return [x]
    cuts = range(0, rows, size)
    if isinstance(x, tuple):
        return [tuple(a[s:s + size] for a in x) for s in cuts]
    return [x[s:s + size] for s in cuts]


def _concatenated(pieces: list[tuple[np.ndarray, ...]]) -> tuple[np.ndarray, ...]:
    if len(pieces) == 1:
        return pieces[0]
    return tuple(np.concatenate(parts) for parts in zip(*pieces))
