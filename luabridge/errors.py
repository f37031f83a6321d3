"""The error Python sees when Lua code fails."""


def _readable(text: str) -> str:
    """Bytes of a Lua message that are not UTF-8 (surrogate escapes here) shown as \\xNN."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


class LuaError(RuntimeError):
    """A Lua error: `message` is the Lua message, `traceback` the Lua stack (file:line)."""

    def __init__(self, message: str, traceback: str = "") -> None:
        message, traceback = _readable(message), _readable(traceback)
        super().__init__(message if not traceback else f"{message}\n{traceback}")
        self.message = message
        self.traceback = traceback
