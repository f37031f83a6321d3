"""Saving and loading a ~100 MB Torch7 model: luabridge (Lua torch.save/torch.load, and the
pure-Python luabridge.t7) against the `torchfile` package's reader and a raw numpy
tofile/fromfile of the same number of bytes, all in one process.

    python bench/t7_io.py [--quick] [--dir DIR]

The model is a VGG-style stack built with the Lua nn (8 SpatialConvolution + 3 Linear layers with
biases, ReLU/pooling between them, about 25.7M float32 parameters), saved without gradient
buffers (gradWeight/gradBias set to nil) as checkpoints often are. Files live in DIR (default: a
temporary directory) and are read back while still in the page cache, so the figures measure
decoding and copying, not the disk. Each figure is the best of several repeats; MB/s counts the
file's bytes. Targets (issue 5): load >= 3x torchfile and >= 0.5x numpy fromfile.
"""
from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np

import luabridge
from machine import cpu_name
from luabridge import t7

MODEL = r"""
require 'nn'
local model = nn.Sequential()
local planes = {{3, 64}, {64, 128}, {128, 256}, {256, 256}, {256, 512}, {512, 512}, {512, 512}, {512, 512}}
for i, p in ipairs(planes) do
  model:add(nn.SpatialConvolution(p[1], p[2], 3, 3, 1, 1, 1, 1)):add(nn.ReLU(true))
  if i % 2 == 0 then model:add(nn.SpatialMaxPooling(2, 2, 2, 2)) end
end
model:add(nn.View(512 * 4 * 4))
model:add(nn.Linear(512 * 4 * 4, 1536)):add(nn.ReLU(true))
model:add(nn.Linear(1536, 1536)):add(nn.ReLU(true))
model:add(nn.Linear(1536, 1000)):add(nn.LogSoftMax())
model = model:float()
for _, m in ipairs(model:listModules()) do m.gradWeight, m.gradBias = nil, nil end
return model
"""


def best(fn: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def parameter_count(model: t7.TorchObject) -> int:
    return sum(m[k].size for m in model.modules for k in ("weight", "bias") if k in m)


def header(nbytes: int, params: int, where: str) -> list[str]:
    cpu = cpu_name()
    return [f"- machine: {cpu}, {os.cpu_count()} cores; numpy {np.__version__}; {luabridge.eval('jit.version')}",
            f"- model: {params:,} float32 parameters, file {nbytes / 1e6:.1f} MB, in {where} (page cache)",
            "- best of several repeats; ratio columns: this row's throughput / the reference's"]


class Bench:
    def __init__(self, folder: Path, repeats: int) -> None:
        self.folder = folder
        self.repeats = repeats
        luabridge.require("torch")
        self.lua_save = luabridge.eval("function(path, obj) torch.save(path, obj) end")
        self.lua_load = luabridge.eval("function(path) return torch.load(path) ~= nil end")
        self.rows: list[tuple[str, str, float]] = []

    def time(self, kind: str, label: str, fn: Callable[[], Any]) -> float:
        t = best(fn, self.repeats)
        self.rows.append((kind, label, t))
        return t

    def run(self) -> tuple[int, int]:
        model_lua = luabridge.execute(MODEL)
        lua_file = self.folder / "model_lua.t7"
        self.time("save", "luabridge torch.save (Lua)", lambda: self.lua_save(str(lua_file), model_lua))
        model = t7.read(lua_file)
        py_file = self.folder / "model_py.t7"
        self.time("save", "luabridge.t7.write (Python)", lambda: t7.write(py_file, model))
        nbytes = lua_file.stat().st_size
        raw = np.random.default_rng(0).integers(0, 255, nbytes, dtype=np.uint8)
        raw_file = self.folder / "raw.bin"
        self.time("save", "numpy tofile (reference)", lambda: raw.tofile(raw_file))

        self.time("load", "luabridge torch.load (Lua)", lambda: self.lua_load(str(lua_file)))
        self.time("load", "luabridge.t7.read (Python)", lambda: t7.read(lua_file))
        torchfile = _torchfile()
        if torchfile is not None:
            self.time("load", "torchfile.load", lambda: torchfile.load(str(lua_file)))
        self.time("load", "numpy fromfile (reference)", lambda: np.fromfile(raw_file, np.uint8))
        return nbytes, parameter_count(model)

    def table(self, nbytes: int) -> tuple[list[str], list[str]]:
        """The rows, and the targets missed."""
        ref = {label: t for _, label, t in self.rows}
        torchfile = ref.get("torchfile.load")
        out = ["| | operation | time | MB/s | vs torchfile.load | vs numpy |", "|---|---|---|---|---|---|"]
        missed = []
        for kind, label, t in self.rows:
            numpy_ref = ref["numpy tofile (reference)" if kind == "save" else "numpy fromfile (reference)"]
            vs_tf = f"{torchfile / t:.2f}x" if torchfile and kind == "load" else "–"
            mbs = nbytes / t / 1e6
            out.append(f"| {kind} | {label} | {t * 1e3:.0f} ms | {mbs:,.0f} | {vs_tf} | {numpy_ref / t:.2f}x |")
            if kind == "load" and label.startswith("luabridge"):
                if torchfile and torchfile / t < 3:
                    missed.append(f"{label}: {torchfile / t:.2f}x torchfile (target 3x)")
                if numpy_ref / t < 0.5:
                    missed.append(f"{label}: {numpy_ref / t:.2f}x numpy fromfile (target 0.5x)")
        return out, missed


def _torchfile() -> Optional[Any]:
    try:
        import torchfile
    except ImportError:
        return None
    return torchfile


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--dir", help="where to write the files (default: a temporary directory)")
    args = parser.parse_args()
    folder = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="t7_io_"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        bench = Bench(folder, 2 if args.quick else 5)
        nbytes, params = bench.run()
        rows, missed = bench.table(nbytes)
    finally:
        if not args.dir:
            shutil.rmtree(folder, ignore_errors=True)
    print("# .t7 save/load throughput\n")
    print("\n".join(header(nbytes, params, "a temporary directory" if not args.dir else args.dir)) + "\n")
    print("\n".join(rows))
    if _torchfile() is None:
        print("\n(torchfile is not installed: its row is left out)")
    print("\nLoad targets (>= 3x torchfile, >= 0.5x numpy fromfile): " + ("all met." if not missed else "missed by"))
    print("\n".join(f"- {m}" for m in missed))


if __name__ == "__main__":
    main()
