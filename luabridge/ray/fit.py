"""luabridge.ray.fit: data-parallel training of a Lua model on Ray actors.

The driver reads the dataset in order, one global batch per step, and cuts each batch into
`workers` shards of nearly equal size. Each worker (a Ray actor holding a replica of the model
in its Lua runtime) computes the criterion's gradient on its shard; the driver averages the
gradients and puts the average in Ray's object store once; every replica then applies the same
optim step with it, so the replicas stay equal and the result is the single-process run's.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Mapping

import numpy as np
import ray
from ray.exceptions import RayActorError, RayTaskError

from ..core.errors import LuaError
from ..core.interop import to_numpy
from ..model.handle import Model, module_state
from ..core.proxy import unwrap
from ..core.runtime import bridge
from ._worker import use_assigned_cpus

# A step's result from one worker: the shard's loss, its flat gradient, and whether the
# criterion averages over the batch (sizeAverage); None for a worker whose shard is empty.
ShardResult = tuple[float, np.ndarray, bool] | None
Update = tuple[float, np.ndarray] | None   # the global batch's loss and gradient


class _Replica:
    """A Ray actor's replica: the model built in the actor's runtime, in training mode, with its
    criterion and optim state (lua/luabridge/ray/fit.lua)."""

    def start(self, model: Model, criterion: str | Model, optim: str, config: Mapping[str, Any],
              seed: int | None) -> None:
        use_assigned_cpus()
        b = bridge()
        if seed is not None:
            b.call(b.module("torch").manualSeed, seed)
        self.module = model.build()
        if isinstance(criterion, Model):
            lua_criterion = criterion.build()
        else:
            b.module("nn")
            lua_criterion = b.call(b.load(f"return {criterion}", "=(luabridge.ray.fit criterion)"))
        self.replica = b.call(b.module("luabridge.ray.fit").replica, unwrap(self.module),
                              unwrap(lua_criterion), optim, unwrap(dict(config)))
        self.dtype = to_numpy(self.replica.params).dtype
        self.averages = bool(b.call(self.replica.averages, self.replica))

    def step(self, update: Update, shard: tuple[np.ndarray, np.ndarray] | None) -> ShardResult:
        """Applies the previous step's update (if any), then gives this shard's loss and gradient."""
        self._apply(update)
        if shard is None:
            return None
        x, y = (np.array(a, dtype=self.dtype) if a.dtype.kind == "f" else np.array(a) for a in shard)
        b = bridge()
        loss, gradient = b.call(self.replica.gradient, self.replica, unwrap(x), unwrap(y))
        return float(loss), np.array(to_numpy(gradient)), self.averages

    def finish(self, update: Update) -> dict[str, np.ndarray]:
        """Applies the last update; gives the trained parameters and buffers (Model.state's keys)."""
        self._apply(update)
        return module_state(self.module)

    def _apply(self, update: Update) -> None:
        if update is not None:
            loss, gradient = update
            b = bridge()
            b.call(self.replica.step, self.replica, loss, unwrap(np.array(gradient)))


def fit(model: Model, criterion: str | Model, dataset: "ray.data.Dataset", workers: int = 1,
        epochs: int = 1, batch_size: int = 32, optim: str = "sgd",
        config: Mapping[str, Any] | None = None, input: str = "input", target: str = "target",
        cpus_per_worker: float = 1, seed: int | None = None, timeout: float | None = 300.0,
        on_step: Callable[[int, int, float], None] | None = None) -> Model:
    """Trains `model` data-parallel on `workers` Ray actors and returns the trained Model.

    criterion: an nn criterion's constructor (``"nn.MSECriterion()"``) or a Model of one.
    dataset: a Ray Dataset with columns `input` and `target`, read in order, `epochs` times;
    each step takes the next `batch_size` rows (the last batch of an epoch may be shorter) and
    gives worker k the k-th of `workers` consecutive shards, whose sizes differ by at most one
    (a shard is empty when the batch has fewer rows than workers). It is materialised in
    Ray's object store first, since the workers may hold all the CPUs its reading tasks need.

    Each worker builds the model (training mode, the Model's weights), computes the criterion's
    gradient on its shard (zeroGradParameters, forward, criterion, backward; the flat gradient of
    getParameters), and the driver combines them: a criterion whose loss is a mean over the batch
    (sizeAverage, the default) gives the batch's gradient as the mean of the shards' gradients
    weighted by their sizes; one with sizeAverage false (a sum) as their sum. The loss is
    combined alike. (A criterion normalising by something else, ClassNLLCriterion with class
    weights, is weighted by rows all the same, which is close but not exact.) Every replica
    then runs ``optim.<optim>`` (sgd, adam, ...) with `config` as its config table and its own
    state, on that loss and gradient. With the same Model, data order and `batch_size`, the
    result equals a single-process loop over the same batches, to float rounding, for any
    `workers`. Buffers (batch norm's running statistics) are worker 0's, from its shards only.

    cpus_per_worker: each actor's Ray CPUs, also its BLAS threads. seed: worker k calls
    torch.manualSeed(seed + k) first (random layers such as Dropout draw per worker).
    on_step(epoch, step, loss) is called on the driver after each step (step counts from 0
    over all epochs). A worker's error is raised here as it comes (a Lua error as
    luabridge.LuaError with the Lua message and traceback, a worker whose process died as
    RuntimeError), and so is a step waiting more than `timeout` seconds (TimeoutError);
    the workers are killed in every case when fit returns."""
    _check(model, criterion, workers, epochs, batch_size)
    data = _materialised(dataset, [input, target])
    actor = ray.remote(_Replica).options(num_cpus=cpus_per_worker, max_restarts=0)
    replicas = [actor.remote() for _ in range(workers)]
    try:
        model_ref = ray.put(model)
        _gather([r.start.remote(model_ref, criterion, optim, dict(config or {}),
                                None if seed is None else seed + k) for k, r in enumerate(replicas)],
                timeout, "starting")
        update, step = None, 0
        for epoch in range(epochs):
            for batch in data.iter_batches(batch_size=batch_size, batch_format="numpy"):
                x, y = _column(batch, input), _column(batch, target)
                bounds = _shard_bounds(len(x), workers)
                refs = [r.step.remote(update, (x[a:b], y[a:b]) if b > a else None)
                        for r, a, b in zip(replicas, bounds, bounds[1:])]
                loss, gradient = _combined(_gather(refs, timeout, f"epoch {epoch}, step {step}"),
                                           np.diff(bounds))
                update = ray.put((loss, gradient))
                if on_step is not None:
                    on_step(epoch, step, loss)
                step += 1
        (state,) = _gather([replicas[0].finish.remote(update)], timeout, "finishing")
    finally:
        for r in replicas:
            ray.kill(r)
    return model.with_state(state)


def _check(model: Any, criterion: Any, workers: int, epochs: int, batch_size: int) -> None:
    if not isinstance(model, Model):
        raise TypeError(f"luabridge.ray.fit: model must be a luabridge.Model, got {type(model).__name__} "
                        "(Model.from_module(module) makes one of a Lua module)")
    if not isinstance(criterion, (str, Model)):
        raise TypeError("luabridge.ray.fit: criterion must be a constructor such as 'nn.MSECriterion()' "
                        f"or a luabridge.Model, got {type(criterion).__name__}")
    for name, value in (("workers", workers), ("epochs", epochs), ("batch_size", batch_size)):
        if not isinstance(value, int) or value < (0 if name == "epochs" else 1):
            raise ValueError(f"luabridge.ray.fit: {name} must be a positive integer, got {value!r}")


def _materialised(dataset: "ray.data.Dataset", columns: list[str]) -> "ray.data.Dataset":
    """The dataset's columns in the object store, rows in the dataset's order."""
    present = dataset.schema().names
    missing = [c for c in columns if c not in present]
    if missing:
        raise KeyError(f"luabridge.ray.fit: the dataset has no column {missing[0]!r} (columns: {present}); "
                       "name the columns with input= and target=")
    # a dataset runs with the context it was made with (shared by the datasets derived from it)
    options = dataset.context.execution_options
    kept, options.preserve_order = options.preserve_order, True
    try:
        if sorted(present) != sorted(columns):
            dataset = dataset.select_columns(columns)
        return dataset.materialize()
    finally:
        options.preserve_order = kept


def _column(batch: dict[str, np.ndarray], name: str) -> np.ndarray:
    """A batch's column as one array (a column of lists or arrays comes as an object array)."""
    a = batch[name]
    return np.stack(list(a)) if a.dtype == object else a


def _shard_bounds(rows: int, workers: int) -> list[int]:
    """Where each worker's shard starts, and the end: the first rows % workers get a row more."""
    size, extra = divmod(rows, workers)
    return [k * size + min(k, extra) for k in range(workers + 1)]


def _combined(results: list[ShardResult], rows: np.ndarray) -> tuple[float, np.ndarray]:
    """The global batch's loss and gradient from the shards' (see fit: size-weighted mean or sum)."""
    parts = [(r, n) for r, n in zip(results, rows) if r is not None]
    averages = parts[0][0][2]
    weights = [n / rows.sum() if averages else 1.0 for _, n in parts]
    loss = sum(w * r[0] for (r, _), w in zip(parts, weights))
    gradient = sum(w * r[1].astype(np.float64) for (r, _), w in zip(parts, weights))
    return float(loss), gradient.astype(parts[0][0][1].dtype)


def _gather(refs: list[ray.ObjectRef], timeout: float | None, when: str) -> list[Any]:
    """The workers' results in order, or the first error among them as soon as it comes."""
    pending = {ref: k for k, ref in enumerate(refs)}
    results: dict[int, Any] = {}
    deadline = None if timeout is None else time.monotonic() + timeout
    while pending:
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        ready, _ = ray.wait(list(pending), num_returns=1, timeout=left)
        if not ready:
            raise TimeoutError(f"luabridge.ray.fit: worker(s) {sorted(pending.values())} gave no "
                               f"result within {timeout} s ({when})")
        k = pending.pop(ready[0])
        results[k] = _result(ready[0], k, when)
    return [results[k] for k in range(len(refs))]


def _result(ref: ray.ObjectRef, k: int, when: str) -> Any:
    try:
        return ray.get(ref)
    except RayTaskError as e:
        cause = e.cause
        if isinstance(cause, LuaError):
            raise LuaError(f"luabridge.ray.fit: worker {k} ({when}): {cause.message}", cause.traceback) from None
        raise RuntimeError(f"luabridge.ray.fit: worker {k} ({when}) raised "
                           f"{type(cause).__name__}: {cause}") from cause
    except RayActorError as e:
        raise RuntimeError(f"luabridge.ray.fit: worker {k} died ({when}): {e}") from None
