"""File-system calls for the Lua `lfs` module (LuaFileSystem's API): Python's os, so that stat
results need no per-platform struct layouts in the FFI."""
from __future__ import annotations

import os
import stat as st
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..core.runtime import Bridge

_MODES = ((st.S_ISREG, "file"), (st.S_ISDIR, "directory"), (st.S_ISLNK, "link"), (st.S_ISSOCK, "socket"),
          (st.S_ISFIFO, "named pipe"), (st.S_ISCHR, "char device"), (st.S_ISBLK, "block device"))


def _mode_name(mode: int) -> str:
    return next((name for test, name in _MODES if test(mode)), "other")


def _permissions(mode: int) -> str:
    return "".join(c if mode & bit else "-" for c, bit in zip(
        "rwxrwxrwx", (st.S_IRUSR, st.S_IWUSR, st.S_IXUSR, st.S_IRGRP, st.S_IWGRP, st.S_IXGRP,
                      st.S_IROTH, st.S_IWOTH, st.S_IXOTH)))


def callbacks(bridge: "Bridge") -> dict:
    lua = bridge.lua

    def failed(e: OSError) -> tuple:
        return None, e.strerror or str(e), e.errno or 0

    def file_stat(path: str, follow: bool) -> Any:
        try:
            s = os.stat(path) if follow else os.lstat(path)
        except OSError as e:
            return failed(e)
        fields = {"dev": s.st_dev, "ino": s.st_ino, "mode": _mode_name(s.st_mode), "nlink": s.st_nlink,
                  "uid": s.st_uid, "gid": s.st_gid, "rdev": s.st_rdev, "access": int(s.st_atime),
                  "modification": int(s.st_mtime), "change": int(s.st_ctime), "size": s.st_size,
                  "permissions": _permissions(s.st_mode), "blocks": s.st_blocks, "blksize": s.st_blksize}
        if not follow and st.S_ISLNK(s.st_mode):
            fields["target"] = os.readlink(path)
        return lua.table_from(fields)

    def file_call(name: str, *args: Any) -> Any:
        """os.<name>(*args): True, or nil, message, errno."""
        try:
            getattr(os, name)(*args)
        except OSError as e:
            return failed(e)
        return True

    def file_list(path: str) -> Any:
        try:
            return lua.table_from([".", "..", *os.listdir(path)])
        except OSError as e:
            return failed(e)

    def file_touch(path: str, atime: float | None, mtime: float | None) -> Any:
        try:
            if not os.path.exists(path):
                open(path, "ab").close()
            if atime is None:
                os.utime(path)
            else:
                os.utime(path, (atime, atime if mtime is None else mtime))
        except OSError as e:
            return failed(e)
        return True

    return {"file_stat": file_stat, "file_call": file_call, "file_list": file_list, "file_touch": file_touch,
            "file_cwd": os.getcwd}
