"""Notebooks: the `%lua` / `%%lua` magics (`%load_ext luabridge`, magics.py), the Lua kernel that
takes iTorch's place (kernel.py; `python -m luabridge.kernel install`), and what both show of Lua
values and pictures (display.py). IPython and ipykernel are needed only here: the `jupyter` extra."""


def load_ipython_extension(ipython) -> None:  # noqa: ANN001 - IPython's InteractiveShell
    """`%load_ext luabridge`: registers the %lua and %%lua magics."""
    from .magics import load

    load(ipython)
