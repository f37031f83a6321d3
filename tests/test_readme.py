"""Every code block of the README and of the docs site (docs/**/*.md) runs by itself, as a reader
would run it: each ```python block in
a fresh Python process, each ```lua block through `luabridge th`, each ```sh block in bash (with
this venv's `luabridge` and `python` first on PATH), each in an empty directory of its own.

A block that cannot run as shown (it needs a file the reader has, a GPU, or is a `make` command)
is preceded by `<!-- norun: reason -->` and is reported as skipped with the reason; one that needs an
optional Python package (PyTorch) is preceded by `<!-- needs: module -->` and is skipped, with the
reason, when that module cannot be imported. Blocks without
a language (output shown to the reader) never run. The blocks run in parallel in a small pool.
"""
from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from processes import run_in_own_group

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").rglob("*.md"))   # the mkdocs site's pages (tests/test_docs.py builds it)
FENCE = re.compile(r"```(\w*)\s*$")
NORUN = re.compile(r"<!--\s*norun:\s*(.*?)\s*-->")
NEEDS = re.compile(r"<!--\s*needs:\s*([\w.]+)\s*-->")
HEADING = re.compile(r"#+\s+(.*)")
BIN = Path(sys.executable).parent   # the venv's python and console scripts
RUNNERS = {  # language -> (file name, command)
    "python": ("block.py", [sys.executable, "block.py"]),
    "lua": ("block.lua", [sys.executable, "-m", "luabridge", "th", "block.lua"]),
    "sh": ("block.sh", ["bash", "-euo", "pipefail", "block.sh"]),
}
TIMEOUT_S = 180


@dataclass(frozen=True)
class Block:
    lang: str
    code: str
    line: int        # of the opening fence
    section: str     # the heading above it
    norun: str | None
    needs: str | None = None   # a module the block imports that may be missing
    doc: str = "README.md"     # the file it is in, relative to the project root

    @property
    def id(self) -> str:
        where = "" if self.doc == "README.md" else re.sub(r"[^A-Za-z0-9]+", "_", self.doc[:-3]) + "-"
        return f"{where}L{self.line}-{self.lang}-{re.sub(r'[^A-Za-z0-9]+', '_', self.section).strip('_')}"


def readme_blocks(text: str, doc: str = "README.md") -> list[Block]:
    """A Markdown file's fenced blocks in a language it runs, each with the heading above it and the
    `norun` reason or the `needs` module written on the last non-blank line before its fence, if any."""
    lines = text.splitlines(keepends=True)
    found, section, i = [], "top", 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if not fence:
            heading = HEADING.match(lines[i])
            section = heading.group(1).strip() if heading else section
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == "```"), len(lines))
        if fence.group(1) in RUNNERS:
            above = next((line.strip() for line in reversed(lines[:i]) if line.strip()), "")
            norun, needs = NORUN.fullmatch(above), NEEDS.fullmatch(above)
            found.append(Block(fence.group(1), "".join(lines[i + 1:end]), i + 1, section,
                               norun.group(1) if norun else None, needs.group(1) if needs else None, doc))
        i = end + 1
    return found


def doc_name(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


BLOCKS = [b for path in [README, *DOCS] for b in readme_blocks(path.read_text(), doc_name(path))]


def missing(module: str | None) -> bool:
    """True when a block `needs` a module that is not installed here."""
    return module is not None and importlib.util.find_spec(module) is None


def run_block(block: Block, folder: Path) -> subprocess.CompletedProcess:
    name, cmd = RUNNERS[block.lang]
    (folder / name).write_text(block.code)
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    try:
        return run_in_own_group(cmd, TIMEOUT_S, cwd=folder, env=env, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        return subprocess.CompletedProcess(cmd, -1, str(e.stdout or ""), f"timed out after {TIMEOUT_S} s")


@pytest.fixture(scope="module")
def outcomes(request, tmp_path_factory) -> dict[str, Future]:
    """Every runnable block this session selected (`-k` picks some), started at once in a pool of
    a few processes at a time."""
    chosen = {item.callspec.params["block"].id for item in request.session.items
              if "block" in getattr(getattr(item, "callspec", None), "params", {})}
    workers = max(1, min(4, os.cpu_count() or 1))
    with ThreadPoolExecutor(workers) as pool:
        yield {b.id: pool.submit(run_block, b, tmp_path_factory.mktemp(b.id))
               for b in BLOCKS if b.id in chosen and not b.norun and not missing(b.needs)}


@pytest.mark.parametrize("block", BLOCKS, ids=[b.id for b in BLOCKS])
def test_block_runs_by_itself(block: Block, outcomes):
    if block.norun:
        pytest.skip(f"{block.doc} line {block.line}: norun: {block.norun}")
    if missing(block.needs):
        pytest.skip(f"{block.doc} line {block.line}: needs {block.needs}, which is not installed (pip install {block.needs})")
    r = outcomes[block.id].result()
    assert r.returncode == 0, (
        f"{block.doc} line {block.line} ({block.lang} block in '{block.section}') exited with {r.returncode}:\n"
        f"{block.code}\n--- stdout ---\n{r.stdout[-3000:]}\n--- stderr ---\n{r.stderr[-3000:]}")


def test_blocks_are_found():
    """Guards the parser: the README and the docs have runnable blocks of each kind (the README's
    quick start among them), every norun gives a reason, and no block hides from the runners under
    another language name (```py, ```bash)."""
    assert len(DOCS) >= 10, DOCS
    langs = [b.lang for b in BLOCKS if not b.norun]
    assert langs.count("python") >= 5 and "lua" in langs, langs
    readme = [b.lang for b in BLOCKS if b.doc == "README.md" and not b.norun]
    assert "python" in readme and "sh" in readme, readme
    assert all(b.norun is None or b.norun for b in BLOCKS)
    for path in [README, *DOCS]:
        other = {m.group(1) for line in path.read_text().splitlines() if (m := FENCE.match(line))} - set(RUNNERS)
        assert other <= {""}, (f"{doc_name(path)}: blocks tagged {sorted(other)}: use python, lua or sh, "
                               "or no language for output")


def test_parser_reads_fences_and_norun():
    text = ("# A\n```python\nprint(1)\n```\n\n## B\n<!-- norun: needs a GPU -->\n```sh\nnvidia-smi\n```\n"
            "```\noutput\n```\n```lua\nprint(2)\n```\n<!-- needs: torch -->\n```python\nimport torch\n```\n")
    assert readme_blocks(text, "docs/x.md")[0] == Block("python", "print(1)\n", 2, "A", None, None, "docs/x.md")
    assert readme_blocks(text) == [
        Block("python", "print(1)\n", 2, "A", None),
        Block("sh", "nvidia-smi\n", 8, "B", "needs a GPU"),
        Block("lua", "print(2)\n", 14, "B", None),
        Block("python", "import torch\n", 18, "B", None, "torch"),
    ]
    assert missing("no_such_module_here") and not missing("pytest") and not missing(None)
