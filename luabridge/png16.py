"""16-bit colour PNGs at full depth. Pillow reads RGB, RGBA and grey-with-alpha PNGs of 16 bits per
sample at 8 bits; torch7's image.load gives such files as v / 65535 in a float tensor, so they are
decoded here from the file's own chunks (zlib and PNG's five row filters). Interlaced ones are left
to Pillow (at 8 bits)."""
from __future__ import annotations

import struct
import zlib

import numpy as np

SIGNATURE = b"\x89PNG\r\n\x1a\n"
# colour type -> samples per pixel, for the types Pillow narrows (grey alone it reads at 16 bits)
_CHANNELS = {2: 3, 4: 2, 6: 4}
HEADER_SIZE = 29   # signature, IHDR's length and name, then width .. interlace
MAX_DATA = 1 << 31   # the most inflated bytes decode accepts (Pillow refuses such sizes before)


def wide_colour_channels(head: bytes) -> int | None:
    """Samples per pixel when the file starting with `head` (HEADER_SIZE bytes) is a non-interlaced
    PNG of 16-bit colour or grey-with-alpha samples (Pillow reads grey-with-alpha as RGBA), else None."""
    if len(head) < HEADER_SIZE or not head.startswith(SIGNATURE) or head[12:16] != b"IHDR":
        return None
    depth, colour, interlace = head[24], head[25], head[28]
    return _CHANNELS.get(colour) if depth == 16 and interlace == 0 else None


def _unfilter(raw: np.ndarray, height: int, stride: int, bpp: int) -> np.ndarray:
    """The rows' bytes without their filters (PNG specification, section 9)."""
    rows = raw.reshape(height, stride + 1)
    out = np.zeros((height, stride), dtype=np.uint8)
    prev = np.zeros(stride, dtype=np.uint8)
    for y in range(height):
        kind, line = rows[y, 0], rows[y, 1:]
        if kind == 0:
            cur = line.copy()
        elif kind == 1:   # Sub: a running sum of each byte position of the pixel, wrapping at 256
            cur = np.cumsum(line.reshape(-1, bpp), axis=0, dtype=np.uint8).reshape(stride)
        elif kind == 2:   # Up
            cur = line + prev
        elif kind in (3, 4):   # Average and Paeth depend on the byte just decoded: plain Python is
            # faster here than numpy calls on a pixel's few bytes
            above, data = prev.tolist(), line.tolist()
            done = data[:bpp]
            for i in range(bpp):
                done[i] = (data[i] + (above[i] >> 1 if kind == 3 else above[i])) & 0xFF
            for i in range(bpp, stride):
                a, b = done[i - bpp], above[i]
                if kind == 3:
                    guess = (a + b) >> 1
                else:
                    c = above[i - bpp]
                    pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                    guess = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                done.append((data[i] + guess) & 0xFF)
            cur = np.array(done, dtype=np.uint8)
        else:
            raise ValueError(f"PNG: unknown row filter {kind} in row {y + 1}")
        out[y] = cur
        prev = cur
    return out


def decode(data: bytes) -> np.ndarray:
    """H x W x C uint16 samples of a file for which wide_colour_channels is not None. A file that is
    cut short or corrupt raises ValueError saying what is wrong; the image data is inflated no
    further than the header's size needs."""
    channels = wide_colour_channels(data[:HEADER_SIZE])
    if channels is None:
        raise ValueError("PNG: not a non-interlaced PNG of 16-bit colour samples")
    width, height = struct.unpack(">II", data[16:24])
    bpp = 2 * channels
    need = height * (width * bpp + 1)
    if width == 0 or height == 0 or need > MAX_DATA:
        raise ValueError(f"PNG: the header's size {width} x {height} is empty or over {MAX_DATA >> 30} GiB of samples")
    pos, chunks = len(SIGNATURE), []
    while True:
        if pos + 12 > len(data):
            raise ValueError("PNG: the file is truncated (it ends before its IEND chunk)")
        length, name = struct.unpack(">I4s", data[pos:pos + 8])
        if pos + 12 + length > len(data):
            chunk = name.decode("latin-1")
            raise ValueError(f"PNG: the file is truncated (its {chunk} chunk of {length} bytes runs past the end)")
        if name == b"IDAT":
            chunks.append(data[pos + 8:pos + 8 + length])
        elif name == b"IEND":
            break
        pos += 12 + length
    inflate = zlib.decompressobj()
    try:
        raw = np.frombuffer(inflate.decompress(b"".join(chunks), need + 1), dtype=np.uint8)
    except zlib.error as e:
        raise ValueError(f"PNG: the image data is corrupt ({e})") from e
    rows_need = f"the {need} bytes that {height} rows of {width} pixels need"
    if raw.size > need:
        raise ValueError(f"PNG: the image data holds more than {rows_need}")
    if raw.size < need or not inflate.eof:
        raise ValueError(f"PNG: the image data is truncated (it gives {raw.size} of {rows_need})")
    rows = _unfilter(raw, height, width * bpp, bpp)
    return rows.view(">u2").reshape(height, width, channels).astype(np.uint16)
