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


# What a thread gets for using a Lua object that another thread's runtime made (lupa refuses it).
FOREIGN_OBJECT = (
    "this Lua object belongs to another thread's runtime: each thread has its own Lua runtime, "
    "and tensors, modules and tables belong to the thread that made them. Share data between "
    "threads as numpy arrays instead (np.array(t) in the thread that owns t, then "
    "luabridge.from_numpy(a) or any call taking the array in this one), or make the object again "
    "here (e.g. luabridge.load a saved model)")
