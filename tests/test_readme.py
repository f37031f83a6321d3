"""Every ```python and ```lua block of the README runs (python blocks in order, one namespace)."""
import re
from pathlib import Path

import luabridge

README = Path(__file__).resolve().parent.parent / "README.md"


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README.read_text(), flags=re.S)


def test_python_snippets_run(lua, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for code in blocks("python"):
        exec(compile(code, "README.md", "exec"), namespace)


def test_lua_snippets_run(lua, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for code in blocks("lua"):
        luabridge.execute(code)
