"""The Python half of the Lua `image` package: files through Pillow (codecs.py, with png16.py for
16-bit PNGs) and the geometry and colour operations on tensors (ops.py)."""
