"""luabridge's version: the one place it is written (luabridge.__version__ re-exports it; the
build reads it from here: pyproject.toml's dynamic version)."""
__version__ = "0.1.0"
