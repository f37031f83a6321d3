"""Threaded, blocked elementwise programs and Bernoulli masks over CPU tensor memory, for Lua.

Large elementwise work (optim's updates on flattened parameters through torch.elementwise,
addcmul / addcdiv, Dropout's masks and products) runs here on the threads the Lua side asks for
(lua/torch/backend/cpu/pointwise.lua and random.lua choose the count with blas.threadsFor: never
more than torch.setnumthreads and the CPUs free).

Programs: a few assignments over named tensors and scalars, in Python's expression syntax,
    "m = b1*m + c1*g; v = b2*v + c2*g*g; x = x - s*m/(sqrt(v) + eps)"
compiled once per (program, element type) into a list of numpy ufunc calls (numpy's SIMD loops).
A call runs that list over blocks of BLOCK_BYTES per operand (THREADED_BLOCK_BYTES on several
threads), so the intermediates of a block stay in cache and each tensor crosses memory once per
program instead of once per op; each thread takes one contiguous range of blocks. Every tensor is a contiguous run of n elements of one type,
zero copy (numpy views over the Lua storages' addresses); the Lua side checks that each pair of
them is the same memory or apart. Statements run in order within a block, so a statement reads
what the ones before it wrote, element by element, as the same ops run one after another would.
Scalars and literals take the tensors' element type (torch7 casts its `real` arguments), so a
Float program computes in float32 throughout.

numexpr was measured for this and lost: on an AVX-512 Xeon its float32 VM took 2.8x numpy's
blocked loops' CPU time for Adam's step on 11.7M parameters and 1.7x numpy's separate passes
(docs/performance.md); numpy's loops are the ones used, and numexpr is no dependency.

Masks: bernoulli_fill fills r with 1 where a uniform draw is below p (else 0) in chunks of
MASK_CHUNK elements, chunk i drawn from numpy's PCG64 seeded with SeedSequence(seed,
spawn_key=(i,)) (numpy's documented pattern for parallel streams), so the result depends on the
seed (one 32-bit draw of the torch generator per call) and n only: not on the thread count.
"""
from __future__ import annotations

import ast
import ctypes
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Callable, Optional

import numpy as np

from ...core.memory import DTYPES

if TYPE_CHECKING:
    from ...core.runtime import Bridge

ENV_VAR = "LUABRIDGE_BLOCKED"   # "0": the callbacks decline, Lua keeps its own passes

BLOCK_BYTES = 128 * 1024        # per operand and block on one thread (32K float32 beat 8K by 1.2x)
# on several: each block's ufunc calls take the GIL back between them, and a thread waiting for it
# stalls; 512 KiB blocks (4x fewer handoffs) made Adam's 11.7M step 20.6 ms on 2 threads against
# 35.2 with 128 KiB (31.4 on one), a 4M product 1.10 against 1.60 (bench/blocked.py --priority)
THREADED_BLOCK_BYTES = 512 * 1024
MASK_CHUNK = 65536              # elements per mask stream (seeding one costs about 9 us)

_BINARY = {ast.Add: np.add, ast.Sub: np.subtract, ast.Mult: np.multiply, ast.Div: np.divide}
_FUNCTIONS = {"sqrt": np.sqrt, "abs": np.absolute, "exp": np.exp, "log": np.log,
              "maximum": np.maximum, "minimum": np.minimum}


class ProgramError(ValueError):
    """A program outside the accepted syntax (a bug in the Lua caller, reported with the program)."""


# An operand of a step: ('t', i) tensor i's block, ('s', i) scalar i, ('k', value) a literal,
# ('m', i) temporary block i.
Operand = tuple[str, Any]


class Program:
    """A compiled program: steps (ufunc, operands, output), output ('t', i) or ('m', i)."""

    def __init__(self, source: str, tensors: list[str], scalars: list[str]) -> None:
        self.source = source
        self.tensors, self.scalars = tensors, scalars
        self.steps: list[tuple[Any, tuple[Operand, ...], Operand]] = []
        self.temps = 0
        self._free: list[int] = []
        try:
            tree = ast.parse("\n".join(part.strip() for part in source.split(";")), mode="exec")
        except SyntaxError as e:
            raise ProgramError(f"elementwise program {source!r}: {e.msg}") from None
        for stmt in tree.body:
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                    and isinstance(stmt.targets[0], ast.Name) and stmt.targets[0].id in tensors):
                raise ProgramError(f"elementwise program {source!r}: each statement assigns one tensor")
            out = ("t", tensors.index(stmt.targets[0].id))
            value = self._operand(stmt.value)
            if value[0] == "m":
                # the last step writes the statement's tensor directly
                fn, args, _ = self.steps[-1]
                self.steps[-1] = (fn, args, out)
                self._release(value)
            else:
                self.steps.append((None, (value,), out))   # a copy
        self.dtype_ready: dict[str, list] = {}

    def _temp(self) -> Operand:
        if self._free:
            return ("m", self._free.pop())
        self.temps += 1
        return ("m", self.temps - 1)

    def _release(self, *ops: Operand) -> None:
        for op in ops:
            if op[0] == "m":
                self._free.append(op[1])

    def _operand(self, node: ast.AST) -> Operand:
        if isinstance(node, ast.Name):
            if node.id in self.tensors:
                return ("t", self.tensors.index(node.id))
            if node.id in self.scalars:
                return ("s", self.scalars.index(node.id))
            raise ProgramError(f"elementwise program {self.source!r}: unknown name {node.id!r}")
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
                and not isinstance(node.value, bool):
            return ("k", float(node.value))
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            return self._step(_BINARY[type(node.op)], [node.left, node.right])
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return self._step(np.negative, [node.operand])
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS \
                and not node.keywords:
            fn = _FUNCTIONS[node.func.id]
            if len(node.args) != fn.nin:
                raise ProgramError(f"elementwise program {self.source!r}: {node.func.id} takes {fn.nin}")
            return self._step(fn, node.args)
        raise ProgramError(f"elementwise program {self.source!r}: unsupported {ast.dump(node)[:60]}")

    def _step(self, fn: Any, nodes: list[ast.AST]) -> Operand:
        args = tuple(self._operand(n) for n in nodes)
        if all(a[0] in "sk" for a in args):
            raise ProgramError(f"elementwise program {self.source!r}: an op on scalars alone")
        self._release(*args)
        out = self._temp()
        self.steps.append((fn, args, out))
        return out


# ------------------------------------------------------------------------------------------
# running a program over memory


def _view(address: float, n: int, dtype: np.dtype) -> np.ndarray:
    """The n elements of dtype at address, as a writable 1-D array (no copy)."""
    buf = (ctypes.c_char * (n * dtype.itemsize)).from_address(int(address))
    return np.frombuffer(buf, dtype=dtype, count=n)


_local = threading.local()   # per thread: temporary blocks by (dtype, count)


def _temps(dtype: np.dtype, count: int, block: int) -> list[np.ndarray]:
    cache = getattr(_local, "temps", None)
    if cache is None:
        cache = _local.temps = {}
    key = (dtype.str, block)
    have = cache.get(key)
    if have is None or len(have) < count:
        have = cache[key] = [np.empty(block, dtype) for _ in range(count)]
    return have


def _plan(prog: Program, dtype: np.dtype, scalars: list[Any]) -> tuple[list, list[Any]]:
    """prog's steps over one list of slots, [tensor blocks..., temporaries..., scalars...,
    literals...]: (ufunc or None for a copy, argument slots, output slot), and the fixed slots."""
    k, m = len(prog.tensors), prog.temps
    fixed = list(scalars)
    literals: dict[float, int] = {}

    def slot(op: Operand) -> int:
        kind, i = op
        if kind == "t":
            return i
        if kind == "m":
            return k + i
        if kind == "s":
            return k + m + i
        if i not in literals:
            literals[i] = k + m + len(fixed)
            fixed.append(dtype.type(i))
        return literals[i]

    steps = [(fn, tuple(slot(a) for a in args), slot(out)) for fn, args, out in prog.steps]
    return steps, fixed


def _run_range(prog: Program, arrays: list[np.ndarray], scalars: list[Any], lo: int, hi: int,
               block: int) -> None:
    """The program over elements lo .. hi - 1, block by block."""
    dtype = arrays[0].dtype
    temps = _temps(dtype, prog.temps, block)[:prog.temps]
    steps, fixed = _plan(prog, dtype, scalars)
    copyto = np.copyto
    with np.errstate(all="ignore"):   # torch7's ops give inf / nan without a word
        _run_blocks(steps, arrays, temps, fixed, lo, hi, block, copyto)


def _run_blocks(steps: list, arrays: list[np.ndarray], temps: list[np.ndarray], fixed: list[Any],
                lo: int, hi: int, block: int, copyto: Callable[..., Any]) -> None:
    for start in range(lo, hi, block):
        stop = min(start + block, hi)
        k = stop - start
        slots = [a[start:stop] for a in arrays]
        slots += temps if k == block else [t[:k] for t in temps]
        slots += fixed
        for fn, args, out in steps:
            if fn is None:
                copyto(slots[out], slots[args[0]])
            elif len(args) == 2:
                fn(slots[args[0]], slots[args[1]], out=slots[out])
            else:
                fn(slots[args[0]], out=slots[out])


_pool: Optional[ThreadPoolExecutor] = None
_pool_pid = 0
_pool_lock = threading.Lock()


def _after_fork_in_child() -> None:
    """A forked child (multiprocessing's fork, a threads-style fork, Ray's workers) has none of
    the parent's other threads: not the pool's workers, and not one that held _pool_lock when the
    fork came (the child's copy of it would stay held, and its first threaded run would wait for
    ever). The child starts with no pool and a fresh lock; its first threaded run makes its own."""
    global _pool, _pool_pid, _pool_lock
    _pool, _pool_pid, _pool_lock = None, 0, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _executor() -> ThreadPoolExecutor:
    """The workers, made on first use (again in a forked child: the parent's threads are not there;
    the pid check covers a fork that skips Python's fork hooks, a C library's fork())."""
    global _pool, _pool_pid
    with _pool_lock:
        if _pool is None or _pool_pid != os.getpid():
            _pool = ThreadPoolExecutor(max_workers=max(os.cpu_count() or 1, 2) - 1,
                                       thread_name_prefix="luabridge-blocked")
            _pool_pid = os.getpid()
        return _pool


def _wait_all(futures: list[Future]) -> None:
    """Waits for every future even through an interrupt (the workers write tensor memory that
    must outlive them), then raises the first error or the interrupt."""
    pending: Optional[BaseException] = None
    for f in futures:
        while True:
            try:
                f.result()
                break
            except BaseException as e:   # noqa: B036 (an interrupt is re-raised below)
                if not f.done():
                    pending = pending or e
                    continue
                pending = pending or e
                break
    if pending is not None:
        raise pending


def _split(n: int, threads: int, block: int, work: Callable[[int, int], None]) -> None:
    """work(lo, hi) over 0 .. n - 1 in `threads` contiguous ranges of whole blocks: the calling
    thread takes the first, pool workers the rest."""
    per = -(-n // threads)
    per = -(-per // block) * block
    ranges = [(lo, min(lo + per, n)) for lo in range(0, n, per)]
    if len(ranges) == 1:
        work(*ranges[0])
        return
    futures = [_executor().submit(work, lo, hi) for lo, hi in ranges[1:]]
    try:
        work(*ranges[0])
    finally:
        _wait_all(futures)


def run_program(prog: Program, type_name: str, n: int, threads: int, addresses: list[float],
                scalars: list[float]) -> None:
    dtype = DTYPES[type_name]
    arrays = [_view(a, n, dtype) for a in addresses]
    values = [dtype.type(s) for s in scalars]
    threads = max(1, int(threads))
    block = (BLOCK_BYTES if threads == 1 else THREADED_BLOCK_BYTES) // dtype.itemsize
    _split(n, threads, block, lambda lo, hi: _run_range(prog, arrays, values, lo, hi, block))


# ------------------------------------------------------------------------------------------
# Bernoulli masks


def bernoulli_fill(type_name: str, address: float, n: int, p: float, seed: int, threads: int) -> None:
    """r[i] = 1 if u_i < p else 0, u_i uniform in [0, 1) of r's type, chunk by chunk."""
    dtype = DTYPES[type_name]
    r = _view(address, n, dtype)
    p_ = dtype.type(p)
    seed = int(seed)

    def work(lo: int, hi: int) -> None:
        for start in range(lo, hi, MASK_CHUNK):
            chunk = r[start:min(start + MASK_CHUNK, hi)]
            stream = np.random.SeedSequence(seed, spawn_key=(start // MASK_CHUNK,))
            np.random.Generator(np.random.PCG64(stream)).random(out=chunk, dtype=dtype)
            np.less(chunk, p_, out=chunk, casting="unsafe")

    _split(n, max(1, int(threads)), MASK_CHUNK, work)


# ------------------------------------------------------------------------------------------


def callbacks(bridge: "Bridge") -> dict[str, Callable[..., Any]]:
    programs: list[Program] = []
    compiled: dict[tuple[str, str, str], int] = {}
    # this runtime's own: a runtime serves one thread, so no other thread holds it at a fork
    lock = threading.Lock()

    def blocked_compile(source: str, tensors: str, scalars: str) -> Optional[int]:
        """The id of a program (tensor and scalar names comma-separated, in the order the run's
        arguments come), or nil when the blocked path is switched off."""
        if os.environ.get(ENV_VAR) == "0":
            return None
        key = (str(source), str(tensors), str(scalars))
        with lock:
            if key not in compiled:
                names = [s for s in key[1].split(",") if s]
                scalar_names = [s for s in key[2].split(",") if s]
                for name in names + scalar_names:
                    if not name.isidentifier():
                        raise ProgramError(f"elementwise program {key[0]!r}: name {name!r} is not an identifier")
                programs.append(Program(key[0], names, scalar_names))
                compiled[key] = len(programs)
            return compiled[key]

    def blocked_run(program_id: int, type_name: str, n: int, threads: int, *args: float) -> None:
        prog = programs[int(program_id) - 1]
        k = len(prog.tensors)
        if len(args) != k + len(prog.scalars):
            raise ProgramError(f"elementwise program {prog.source!r}: {len(args)} arguments for "
                               f"{k} tensors and {len(prog.scalars)} scalars")
        run_program(prog, str(type_name), int(n), int(threads), list(args[:k]), list(args[k:]))

    def blocked_bernoulli(type_name: str, address: float, n: int, p: float, seed: float, threads: int) -> bool:
        if os.environ.get(ENV_VAR) == "0":
            return False
        bernoulli_fill(str(type_name), address, int(n), float(p), int(seed), int(threads))
        return True

    return {"blocked_compile": blocked_compile, "blocked_run": blocked_run,
            "blocked_bernoulli": blocked_bernoulli}
