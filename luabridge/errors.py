"""The error Python sees when Lua code fails."""


class LuaError(RuntimeError):
    """A Lua error: `message` is the Lua message, `traceback` the Lua stack (file:line)."""

    def __init__(self, message: str, traceback: str = "") -> None:
        super().__init__(message if not traceback else f"{message}\n{traceback}")
        self.message = message
        self.traceback = traceback
