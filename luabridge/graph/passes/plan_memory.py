"""Memory planning. Reference counts find where each entry dies; an op's output takes over an
input's memory in place when that input dies there with the same size and type (the entries
then form one chain). Every chain then gets an offset in one arena per element type, placed
largest first at the best-fitting gap among the chains whose lifetimes overlap it (a free list
matched by size, in address space). Variables (external entries) are never planned."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..graph import Graph

EXTERNAL = -1   # a variable's entry: its buffer lives in the session
EMPTY = -2      # a zero-size entry: no memory
ALIGN_BYTES = 64  # chain offsets are multiples of 64 bytes


@dataclass
class MemoryReport:
    planned_bytes: int       # the arenas' sizes
    naive_bytes: int         # one buffer per entry, each starting at a 64-byte boundary as the
                             # arena's do (so planned never exceeds it)
    lower_bound_bytes: int   # the most bytes live at one step (liveness lower bound; an output
                             # written in place over its dying input counts once)
    num_storages: int        # chains: entries sharing memory in place

    def __str__(self) -> str:
        return (f"planned {self.planned_bytes} B ({self.num_storages} buffers), naive "
                f"{self.naive_bytes} B, liveness lower bound {self.lower_bound_bytes} B")


def entry_bytes(graph: Graph) -> list[int]:
    return [int(np.prod(s, dtype=np.int64)) * np.dtype(t).itemsize
            for s, t in zip(graph.attrs["shape"], graph.attrs["dtype"])]


def plan_memory(graph: Graph) -> Graph:
    """graph with attrs "storage_id" (by entry: its chain, or EXTERNAL / EMPTY), by chain
    "storage_bytes", "storage_dtype", "storage_offset" (elements into its type's arena) and
    "storage_life"; "arena_elements" ({dtype: elements}); "frees_after" (node index -> chains
    last read there); "lifetime" (entry -> (first, last) node index); "memory" (MemoryReport)."""
    nbytes = entry_bytes(graph)
    sid, sizes, stypes, frees_after, shared_at, last = _chains(graph, nbytes)
    lifetime = _lifetimes(graph, last)
    life = [(len(graph.nodes), -1)] * len(sizes)
    for eid, s in enumerate(sid):
        if s >= 0:
            a, b = lifetime[eid]
            life[s] = (min(life[s][0], a), max(life[s][1], b))
    offsets, arenas = _place(sizes, stypes, life)
    report = MemoryReport(sum(n * np.dtype(t).itemsize for t, n in arenas.items()),
                          sum(_aligned(b, 1) for b, s in zip(nbytes, sid) if s >= 0),
                          _lower_bound(graph, nbytes, sid, lifetime, shared_at), len(sizes))
    return graph.with_attrs(storage_id=sid, storage_bytes=sizes, storage_dtype=stypes,
                            storage_offset=offsets, storage_life=life, arena_elements=arenas,
                            frees_after=frees_after, lifetime=lifetime, memory=report)


def _chains(graph: Graph, nbytes: list[int]) -> tuple:
    """Chain ids by entry (in-place outputs join their input's chain), chain sizes and types,
    the chains freed after each node, in-place bytes by node, and each entry's last reader."""
    dtypes = graph.attrs["dtype"]
    n = graph.num_entries
    refs, last = [0] * n, [-1] * n
    for nid, node in enumerate(graph.nodes):
        for eid in graph.input_eids(node):
            refs[eid] += 1
            last[eid] = nid
    for e in graph.outputs:
        refs[graph.entry_id(e)] += 1
        last[graph.entry_id(e)] = len(graph.nodes)
    sid = [EXTERNAL] * n
    sizes: list[int] = []
    stypes: list[str] = []
    frees_after: dict[int, list[int]] = {}
    shared_at: dict[int, int] = {}
    for nid, node in enumerate(graph.nodes):
        if node.op is None:
            continue
        ins, outs = graph.input_eids(node), graph.output_eids(node)
        taken: set[int] = set()
        for i, o in node.op.inplace:
            if i >= len(ins) or o >= len(outs):
                continue
            e, out = ins[i], outs[o]
            if (sid[e] >= 0 and refs[e] == 1 and sid[e] not in taken and sid[out] == EXTERNAL
                    and nbytes[e] == nbytes[out] and dtypes[e] == dtypes[out]):
                sid[out] = sid[e]
                taken.add(sid[e])
                refs[e] = 0
                shared_at[nid] = shared_at.get(nid, 0) + nbytes[e]
        for o in outs:
            if sid[o] == EXTERNAL:
                if nbytes[o] == 0:
                    sid[o] = EMPTY
                else:
                    sid[o] = len(sizes)
                    sizes.append(nbytes[o])
                    stypes.append(dtypes[o])
        released = []
        for e in ins:
            if refs[e] > 0:
                refs[e] -= 1
                if refs[e] == 0 and sid[e] >= 0:
                    released.append(sid[e])
        released += [sid[o] for o in outs if refs[o] == 0 and sid[o] >= 0]
        if released:
            frees_after[nid] = released
    return sid, sizes, stypes, frees_after, shared_at, last


def _place(sizes: list[int], stypes: list[str], life: list) -> tuple[list[int], dict]:
    """Element offsets of the chains in one arena per type: largest first, each at the
    smallest gap that fits between the chains placed already whose lifetimes overlap it."""
    offsets = [0] * len(sizes)
    arenas: dict[str, int] = {}
    placed: dict[str, list[int]] = {}
    for c in sorted(range(len(sizes)), key=lambda c: (-sizes[c], life[c][0])):
        dt = stypes[c]
        item = np.dtype(dt).itemsize
        n = -(-sizes[c] // item)
        busy = sorted((offsets[o], offsets[o] + _elements(sizes[o], stypes[o]))
                      for o in placed.get(dt, []) if _overlap(life[c], life[o]))
        best, best_gap, at = None, None, 0
        for lo, hi in busy:
            if lo - at >= n and (best_gap is None or lo - at < best_gap):
                best, best_gap = at, lo - at
            at = max(at, _aligned(hi, item))
        offsets[c] = best if best is not None else at
        placed.setdefault(dt, []).append(c)
        arenas[dt] = max(arenas.get(dt, 0), offsets[c] + n)
    return offsets, arenas


def _elements(nbytes: int, dtype: str) -> int:
    return -(-nbytes // np.dtype(dtype).itemsize)


def _aligned(k: int, itemsize: int) -> int:
    step = max(1, ALIGN_BYTES // itemsize)
    return -(-k // step) * step


def _overlap(a: tuple, b: tuple) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


def _lifetimes(graph: Graph, last: list[int]) -> list[tuple[int, int]]:
    life = []
    for nid, node in enumerate(graph.nodes):
        for eid in graph.output_eids(node):
            life.append((nid, max(nid, last[eid])))
    return life


def _lower_bound(graph: Graph, nbytes: list[int], sid: list[int], life: list, shared_at: dict) -> int:
    steps = len(graph.nodes) + 1
    delta = np.zeros(steps + 1, dtype=np.int64)
    for eid, (a, b) in enumerate(life):
        if sid[eid] >= 0:
            delta[a] += nbytes[eid]
            delta[b + 1] -= nbytes[eid]
    live = np.cumsum(delta)
    for nid, shared in shared_at.items():
        live[nid] -= shared
    return int(live.max()) if steps else 0
