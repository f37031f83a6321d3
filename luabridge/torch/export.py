"""`export`: a Torch7 model as files that need PyTorch alone (no luabridge, no pickled classes).

    OUTDIR/model.py           class Model(torch.nn.Module) in plain torch.nn (export_source)
    OUTDIR/model.safetensors  Model().state_dict()
    OUTDIR/model.pt           the same state_dict for torch.load(weights_only=True)   (pt=True)
    OUTDIR/model.pt2          torch.export's program, torch.export.load               (pt2=True)
    OUTDIR/model.onnx         ONNX (float32), checked with onnxruntime                (onnx=True)

The model is converted as `convert` converts it (strict: a class without a PyTorch counterpart
is a ConversionError naming it and its path), the source is written from the converted tree,
then imported back and checked: the same modules, settings and weights as the converted tree
(and the same outputs on an example input when there is one). `luabridge export` is `main`.
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import importlib.util
import io
import os
import sys
import uuid
from pathlib import Path
from typing import Any, Iterator, Sequence

import torch

from ..core.errors import LuaError
from ..core.proxy import LuaObject, wrap
from ..core.runtime import bridge
from ..t7 import FORMATS
from .convert import (ConversionError, Progress, add_progress_option, command_progress, convert, recursion_room,
                      tree_size)
from .export_source import ExportError, recording, write_source
from .given import module_value
from .module import LuaModule

Input = Any   # a tensor, or a (nested) list of them: what the model takes
_MISSING = object()
# ONNX is written in float32: onnxruntime's CPU kernels (convolutions...) have no float64
ONNX_DTYPE = torch.float32
ONNX_TOL = dict(rtol=1e-5, atol=1e-5)


def _lua_model(module_or_path: Any, format: str) -> tuple[LuaObject, str]:
    """The Lua module to export and how model.py names it."""
    if isinstance(module_or_path, LuaModule):
        value, path = module_or_path.lua, None
    else:
        value, path = module_value(module_or_path, "export", format)
        value = value if path is not None or isinstance(value, LuaObject) else wrap(value)
    source = f" from {os.path.basename(path)}" if path is not None else ""
    lua_torch = bridge().lua.globals().torch
    if not (isinstance(value, LuaObject) and (lua_torch.isTypeOf(value._lua, "nn.Module")
                                              or lua_torch.isTypeOf(value._lua, "nn.Criterion"))):
        what = value._typename() if isinstance(value, LuaObject) else type(value).__name__
        where = f"{module_or_path} holds" if source else "got"
        raise TypeError(f"export expects an nn module (a .t7 file, a Lua module, its constructor string or a "
                        f"LuaModule); {where} a {what}")
    return value, f"The torch7 {value._typename()}{source}"


def _load_source(path: Path) -> Any:
    """model.py imported under a name of its own (nothing of it stays in sys.modules)."""
    name = f"luabridge_export_{uuid.uuid4().hex}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module   # dataclasses and pickling look classes up there while it runs
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[name]
    return module


def _leaves(x: Any) -> list[Any]:
    return [v for e in x for v in _leaves(e)] if isinstance(x, (list, tuple)) else [x]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dtype == b.dtype
                and a.shape == b.shape and bool(torch.equal(a, b)))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if callable(a) and callable(b) and not isinstance(a, torch.nn.Module):
        return getattr(a, "__name__", None) == getattr(b, "__name__", None)
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True
    return type(a) is type(b) and a == b


def _check(converted: torch.nn.Module, model: torch.nn.Module) -> None:
    """model, made by the written source, is the converted tree: the same modules at the same
    names (shared where they are shared), the same settings and the same weights."""
    ours = list(converted.named_modules(remove_duplicate=False))
    theirs = list(model.named_modules(remove_duplicate=False))
    if [n for n, _ in ours] != [n for n, _ in theirs]:
        raise ExportError(type(converted).__name__, "", "was written with other module names than it has "
                          f"({[n for n, _ in ours][:6]} against {[n for n, _ in theirs][:6]})")
    first_ours: dict[int, int] = {}
    first_theirs: dict[int, int] = {}
    for i, ((path, mine), (_, written)) in enumerate(zip(ours, theirs)):
        if first_ours.setdefault(id(mine), i) != first_theirs.setdefault(id(written), i):
            raise ExportError(type(mine).__name__, path, "is shared differently in the written source")
        if isinstance(mine, torch.fx.GraphModule):
            continue
        for key, value in vars(mine).items():
            if key.startswith("_") or key == "training":
                continue
            if key == "name" and value == type(mine).__name__:   # torch.nn.Upsample names itself
                continue
            if not _same(value, vars(written).get(key, _MISSING)):
                raise ExportError(type(mine).__name__, path, f"was written with {key} = {vars(written).get(key)!r}, "
                                                          f"not {value!r}")
    state, again = converted.state_dict(), model.state_dict()
    for key, value in state.items():
        if not _same(value, again[key]):
            raise ExportError(type(converted).__name__, "", f"was written with another {key}")


def _first_leaf(module: torch.nn.Module) -> torch.nn.Module:
    """The module that meets the input first, through Sequentials and single-child decorators."""
    while isinstance(module, torch.nn.Sequential) and len(module):
        module = module[0]
    return module


def _dtype(model: torch.nn.Module) -> torch.dtype:
    return next((t.dtype for t in model.state_dict().values() if t.is_floating_point()), torch.float64)


def example_input(model: torch.nn.Module, input_size: Any = None, example: Input | None = None) -> Input | None:
    """The input torch.export and ONNX trace with: `example`; else random values of `input_size`
    (a tuple of sizes, or a list of them for a table input) in the model's dtype; else, where the
    first layer tells (Linear, LookupTable), one sample of its input; else None."""
    if example is not None:
        return example
    dtype = _dtype(model)
    if input_size is not None:
        if input_size and all(isinstance(s, (list, tuple)) for s in input_size):
            return [torch.randn(*s, dtype=dtype) for s in input_size]
        return torch.randn(*input_size, dtype=dtype)
    first = _first_leaf(model)
    if isinstance(first, torch.nn.Linear):
        return torch.randn(1, first.in_features, dtype=dtype)
    if isinstance(first, torch.nn.Embedding):
        return torch.ones(1, 1, dtype=torch.long)
    return None


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """torch.onnx's progress lines kept off the caller's output."""
    with contextlib.redirect_stdout(io.StringIO()):
        yield


def _as(x: Input, dtype: torch.dtype) -> Input:
    if isinstance(x, (list, tuple)):
        return [_as(v, dtype) for v in x]
    return x.to(dtype) if x.is_floating_point() else x


def _write_pt2(model: torch.nn.Module, x: Input, path: Path) -> None:
    program = torch.export.export(model, (x,))
    torch.export.save(program, path)
    again = torch.export.load(path).module()
    got, want = _leaves(again(x)), _leaves(model(x))
    if not all(torch.allclose(g, w, rtol=1e-10, atol=1e-10) for g, w in zip(got, want)):
        raise ExportError(type(model).__name__, "", f"gives other outputs once saved by torch.export ({path})")


def _write_onnx(model: torch.nn.Module, x: Input, path: Path) -> bool:
    """Writes model.onnx in float32 and checks it with onnxruntime (False: onnxruntime is not
    installed, the file is unchecked)."""
    model32 = copy.deepcopy(model).to(ONNX_DTYPE).eval()
    x32 = _as(x, ONNX_DTYPE)
    with _quiet():
        torch.onnx.export(model32, (x32,), path, dynamo=True, external_data=False, verbose=False)
    try:
        import onnxruntime
    except ImportError:
        return False
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feeds = {i.name: leaf.detach().numpy() for i, leaf in zip(session.get_inputs(), _leaves(x32))}
    got = session.run(None, feeds)
    with torch.no_grad():
        want = _leaves(model32(x32))
    for i, (g, w) in enumerate(zip(got, want)):
        if not torch.allclose(torch.from_numpy(g), w, **ONNX_TOL):
            raise ExportError(type(model).__name__, "", f"gives other outputs under onnxruntime (output {i + 1}, "
                                                        f"largest difference {(torch.from_numpy(g) - w).abs().max():.3g})")
    return True


def export(module_or_path: Any, outdir: str | os.PathLike, onnx: bool = False, pt2: bool = False,
           pt: bool = False, input_size: Any = None, example: Input | None = None,
           format: str = "binary", progress: Progress | None = None) -> dict[str, Path]:
    """Writes a Torch7 model (a .t7 path, a Lua module, its constructor string or a LuaModule)
    into `outdir` (made if missing) as files that need PyTorch alone: model.py (`class Model`,
    plain torch.nn; torch7 layers torch.nn lacks as small classes; nngraph graphs as forward code)
    and model.safetensors (its state_dict), so that

        model = Model(); model.load_state_dict(safetensors.torch.load_file(...)); model.eval()

    computes what the Lua model computes. `pt`: also model.pt, the state_dict for
    torch.load(weights_only=True); `pt2`: model.pt2 (torch.export); `onnx`: model.onnx, float32,
    checked with onnxruntime where it is installed. pt2 and ONNX trace the model on `example`, or
    on random values of `input_size` (e.g. (1, 3, 32, 32); a list of sizes for a table input),
    or, without either, on one sample where the first layer tells its size (Linear, LookupTable).
    `progress`: as convert's, told (done, total) as the modules convert.
    Returns the paths written, by kind ("source", "weights", "pt", "pt2", "onnx"). A module
    without a PyTorch counterpart raises ConversionError (naming its class and path), one that
    cannot be written as source ExportError (the same)."""
    try:
        from safetensors.torch import save as safetensors_bytes
    except ImportError as e:
        raise ImportError("export writes safetensors: pip install 'luabridge[export]' (or: pip install "
                          "safetensors)") from e
    if onnx and (importlib.util.find_spec("onnxscript") is None or importlib.util.find_spec("onnx") is None):
        raise ImportError("export: onnx=True needs the onnx and onnxscript packages (torch.onnx.export's): "
                          "pip install 'luabridge[export]'")
    lua, description = _lua_model(module_or_path, format)
    out = Path(outdir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:   # a file where a folder must be, no permission: named, not a bare errno
        raise OSError(e.errno, f"cannot make the folder ({e.strerror})", str(out)) from None
    with recursion_room(tree_size(lua)):
        with recording() as calls:
            converted = convert(lua, progress=progress)
        source = write_source(converted, calls, description)
        del calls
        written = {"source": out / "model.py"}
        written["source"].write_text(source, encoding="utf-8")
        model = _load_source(written["source"]).Model()
        model.load_state_dict(converted.state_dict())
        _check(converted, model)
        x = example_input(converted, input_size, example)
        if x is not None:
            converted.eval()
            model.eval()
            with torch.no_grad():
                try:
                    want = converted(x)
                except Exception:
                    if input_size is not None or example is not None:
                        raise
                    want = x = None   # a size guessed from the first layer that the model does not take
                if x is not None and not _same(_leaves(want), _leaves(model(x))):
                    raise ExportError(type(converted).__name__, "", "computes otherwise once written as source")
        state = _unshared(model.state_dict())
        written["weights"] = out / "model.safetensors"
        written["weights"].write_bytes(safetensors_bytes(state, metadata={"format": "pt"}))
        if pt:
            written["pt"] = out / "model.pt"
            torch.save(state, written["pt"])
        if pt2 or onnx:
            if x is None:
                raise ValueError("export: pt2 and onnx trace the model on an example input, and its first layer "
                                 "does not tell the size: pass input_size=(...) (luabridge export: --input-size, "
                                 "e.g. 1x3x32x32)")
            model.eval()
            if pt2:
                written["pt2"] = out / "model.pt2"
                _write_pt2(model, x, written["pt2"])
            if onnx:
                written["onnx"] = out / "model.onnx"
                if not _write_onnx(model, x, written["onnx"]):
                    written["onnx_unchecked"] = written["onnx"]
    return written


def _unshared(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The state_dict as safetensors takes it: contiguous, no two entries on the same memory
    (a tensor tied to another, torch7's shared weights, is saved as a copy; loading ties it again)."""
    seen: set[tuple] = set()
    out = {}
    for key, t in state.items():
        t = t.detach().contiguous()
        where = (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape))
        out[key] = t.clone() if where in seen and t.numel() else t
        seen.add(where)
    return out


# ---- luabridge export

EPILOG = """\
It writes OUTDIR/model.py (class Model, plain torch.nn) and OUTDIR/model.safetensors; in any
Python with PyTorch (no luabridge):
  import safetensors.torch, sys; sys.path.insert(0, "OUTDIR"); from model import Model
  model = Model(); model.load_state_dict(safetensors.torch.load_file("OUTDIR/model.safetensors")); model.eval()
--onnx writes model.onnx (float32, checked with onnxruntime), --pt2 model.pt2 (torch.export),
--pt model.pt (the state_dict, torch.load(weights_only=True)). Needs PyTorch and safetensors:
pip install 'luabridge[export]'."""


def _size(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(s) for s in text.lower().replace(",", "x").split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size such as 1x3x32x32") from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size such as 1x3x32x32")
    return sizes


def main(argv: Sequence[str]) -> int:
    """`luabridge export MODEL.t7 OUTDIR [--onnx] [--pt2] [--pt] [--input-size 1x3x32x32]`."""
    p = argparse.ArgumentParser(prog="luabridge export", epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                description="Write a Torch7 nn model (.t7) as a PyTorch source file and its weights, "
                                            "which need PyTorch alone.")
    p.add_argument("model", help="a .t7 file holding an nn module (nn.Sequential, nn.gModule, ...)")
    p.add_argument("outdir", help="the folder to write into (made if missing)")
    p.add_argument("--onnx", action="store_true", help="also write model.onnx (float32), checked with onnxruntime")
    p.add_argument("--pt2", action="store_true", help="also write model.pt2 (torch.export.save)")
    p.add_argument("--pt", action="store_true", help="also write model.pt: the state_dict, for "
                                                     "torch.load(weights_only=True)")
    p.add_argument("--input-size", type=_size, action="append", metavar="SIZE",
                   help="the input --onnx and --pt2 trace with, e.g. 1x3x32x32; repeat it for a table input")
    p.add_argument("--format", default="binary", choices=FORMATS)
    add_progress_option(p)
    a = p.parse_args(argv)
    if not os.path.isfile(a.model):
        return _failed(f"{a.model}: no such file")
    sizes = None if a.input_size is None else a.input_size[0] if len(a.input_size) == 1 else a.input_size
    progress = command_progress(a.progress, "luabridge export")
    try:
        try:
            written = export(a.model, a.outdir, onnx=a.onnx, pt2=a.pt2, pt=a.pt, input_size=sizes, format=a.format,
                             progress=progress)
        finally:
            if progress is not None:
                progress.close()
    except LuaError as e:
        return _failed(e.message)
    except ConversionError as e:
        return _failed(f"{a.model}: {e}")
    except (ExportError, TypeError, ValueError, ImportError) as e:
        return _failed(f"{a.model}: {e}")
    except OSError as e:
        return _failed(f"{e.filename or a.outdir}: {e.strerror or e}")
    for kind, path in written.items():
        if kind == "onnx_unchecked":
            print(f"{path}: not checked (onnxruntime is not installed)", file=sys.stderr)
        else:
            print(path)
    return 0


def _failed(message: str) -> int:
    print(f"luabridge export: {message}", file=sys.stderr)
    return 1


__all__ = ["ExportError", "example_input", "export", "main"]
