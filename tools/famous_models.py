"""Builds famous Torch7 models from their public definition files and checks them end to end.

    python tools/famous_models.py REPOS [--only NAME ...] [--timeout-scale X]

REPOS is a folder of checked-out repositories, as for tools/real_programs.py (whose runner this
uses: a scratch copy of the repository, `luabridge th`, a time limit). In it
tools/famous_models.lua builds the model from the repository's own definition file (the rnn
language model and the colorization net it builds itself, in an empty folder), runs a training
step's forward and backward, saves it with torch.save and loads it back with torch.load, requiring
the same output. Here the saved file is read again with luabridge.t7.read (pure Python): its
weights, in the order nn's getParameters lays them out, must equal the parameters the Lua side
wrote, bit for bit, and PyTorch's float64 forward of the model it finds (tools/t7_reference.py)
must give Lua's output to 1e-5 (relative). Prints a markdown table: sizes, parameter count, file
size, timings, the reference's difference, pass or fail.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
import real_programs as rp  # noqa: E402
import t7_reference  # noqa: E402

from luabridge import t7  # noqa: E402

DRIVER = HERE / "famous_models.lua"


@dataclass
class Famous:
    name: str      # the driver's builder name
    repo: str | None   # None: the driver builds it alone, in an empty scratch folder
    what: str
    timeout: float = 300.0


MODELS = [
    Famous("openface", "cmusatyalab/openface",
           "OpenFace nn4.small2 (models/openface/nn4.small2.def.lua), 128-d unit embedding"),
    Famous("fast-neural-style", "jcjohnson/fast-neural-style",
           "transform net of models.lua with train.lua's defaults (instance norm, reflect-start padding), "
           "saved and read as a {model = ...} checkpoint"),
    Famous("fast-neural-style-reflect", "jcjohnson/fast-neural-style",
           "the same with -padding_type reflect, as a checkpoint"),
    Famous("rnn-lm", None, "LookupTable, Sequencer(FastLSTM, Linear, LogSoftMax), SequencerCriterion in char-rnn's "
           "sizes, trained a few SGD steps (the loss falls at each)"),
    Famous("colorization", None, "a two-input gModule (luminance image, global features replicated over the "
           "feature map, fused) to two chrominance planes, as a checkpoint"),
]

NO_REPOSITORY = "luabridge/scratch"   # the empty folder the repository-free models run in


@dataclass
class Row:
    model: Famous
    ok: bool
    detail: str
    fields: dict[str, str] = field(default_factory=dict)


def parse_report(output: str) -> dict[str, str]:
    """The driver's `famous key=value ...` line as a dict."""
    line = next(line for line in output.splitlines() if line.startswith("famous "))
    return dict(item.split("=", 1) for item in line.split()[1:])


def parameters(module: Any) -> Iterator[np.ndarray]:
    """A module's weights in nn's parameters() order: each child's in turn, else weight then bias."""
    children = module.get("modules")
    if children is not None:
        for child in children.values() if isinstance(children, dict) else children:
            yield from parameters(child)
        return
    for name in ("weight", "bias"):
        if isinstance(module.get(name), np.ndarray):
            yield module[name]


def weight_problems(outdir: Path, checkpoint_key: str) -> list[str]:
    """Where luabridge.t7.read's weights of OUTDIR/model.t7 differ from the Lua parameters."""
    saved = t7.read(outdir / "model.t7")
    model = saved[checkpoint_key] if checkpoint_key else saved
    weights = list(parameters(model))
    read = np.concatenate([w.ravel() for w in weights]) if weights else np.zeros(0, np.float32)
    lua = np.fromfile(outdir / "params.f32", dtype="<f4")
    if read.size != lua.size:
        return [f"t7.read found {read.size} parameters, Lua has {lua.size}"]
    if not np.array_equal(read.astype(np.float32), lua):
        return [f"t7.read's weights differ from Lua's at {int(np.argmax(read != lua))}"]
    return []


def dims(sizes: str) -> list[int]:
    return [int(n) for n in sizes.split("x")]


def reference_difference(outdir: Path, fields: dict[str, str], checkpoint_key: str) -> float | str:
    """max |Lua's output - PyTorch's float64 forward of what t7.read finds| / max |the latter|, or
    why there is none: the driver wrote no input or the model has a class t7_reference does not
    know (the tests check those against numpy), or PyTorch is not installed."""
    if not (outdir / "input.f32").exists():
        return "in tests"
    saved = t7.read(outdir / "model.t7")
    x = np.fromfile(outdir / "input.f32", dtype="<f4").reshape(dims(fields["input"]))
    lua = np.fromfile(outdir / "output.f32", dtype="<f4").reshape(dims(fields["output"]))
    try:
        ref = t7_reference.forward(saved[checkpoint_key] if checkpoint_key else saved, x)
    except t7_reference.Unsupported:
        return "in tests"
    except ImportError:
        return "needs PyTorch"
    if ref.shape != lua.shape:
        return float("inf")
    return float(np.abs(ref - lua).max() / max(np.abs(ref).max(), 1e-30))


def check_model(m: Famous, repos: Path, scale: float = 1.0) -> Row:
    with tempfile.TemporaryDirectory(prefix="luabridge-famous-") as out:
        if m.repo is None:
            repos = Path(out) / "repos"
            (repos / NO_REPOSITORY.replace("/", "+")).mkdir(parents=True)
        program = rp.Program(name=m.name, repo=m.repo or NO_REPOSITORY, what=m.what,
                             args=[str(DRIVER), m.name, out], expect=[r"^famous "], timeout=m.timeout)
        run = rp.run_program(program, repos, scale)
        if not run.ok:
            return Row(m, False, run.detail)
        fields = parse_report(run.output)
        problems = []
        if fields["check"] != "ok":
            problems.append("output check failed: " + fields["note"].replace("_", " "))
        if float(fields["reload_diff"]) != 0:
            problems.append(f"output after torch.load differs by {fields['reload_diff']}")
        problems += weight_problems(Path(out), fields["checkpoint"])
        diff = reference_difference(Path(out), fields, fields["checkpoint"])
        fields["reference"] = diff if isinstance(diff, str) else f"{diff:.0e}"
        if isinstance(diff, float) and not diff <= 1e-5:   # float32 against float64
            problems.append(f"the forward of t7.read's model differs from Lua's output by {diff:.1e} (relative)")
        fields["file_mb"] = f"{(Path(out) / 'model.t7').stat().st_size / 2 ** 20:.1f}"
    return Row(m, not problems, "; ".join(problems), fields)


def table(rows: list[Row]) -> str:
    lines = ["| model | input | output | parameters | file MB | forward ms | backward ms | save/load ms "
             "| t7.read forward | result |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        f = r.fields
        cells = [f.get(k, "") for k in ("input", "output")]
        cells.append(f"{int(f['params']):,}" if "params" in f else "")
        cells.append(f.get("file_mb", ""))
        cells += [f"{float(f[k]):.0f}" if k in f else "" for k in ("forward_ms", "backward_ms", "save_load_ms")]
        cells.append(f.get("reference", ""))
        verdict = "pass" if r.ok else "FAIL: " + r.detail[:160].replace("|", "\\|")
        lines.append(f"| {r.model.name} | " + " | ".join(cells) + f" | {verdict} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("repos", type=Path, help="folder of checked-out repositories")
    ap.add_argument("--only", nargs="*", help="check these models (names) only")
    ap.add_argument("--timeout-scale", type=float, default=1.0, help="multiply every time limit")
    a = ap.parse_args(argv)
    rows = [check_model(m, a.repos, a.timeout_scale) for m in MODELS if not a.only or m.name in a.only]
    print(table(rows))
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
