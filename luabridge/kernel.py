"""`python -m luabridge.kernel install [--user | --prefix P | --sys-prefix]` installs the Jupyter
kernelspec 'luabridge' (Lua notebooks with torch, in iTorch's place); `python -m luabridge.kernel
-f CONNECTION_FILE` runs the kernel. The kernel is luabridge/jupyter/kernel.py."""
from .jupyter.kernel import main

if __name__ == "__main__":
    raise SystemExit(main())
