"""16-bit colour PNGs at full depth. Pillow reads RGB, RGBA and grey-with-alpha PNGs of 16 bits per
sample at 8 bits; torch7's image.load gives such files as v / 65535 in a float tensor, so their
image data is checked here (sizes, zlib, row filters) and then unfiltered by Pillow's own PNG
decoder twice, once keeping each sample's high byte and once its low byte (PNG's filters work on
each byte position of a pixel on its own, so both passes see the same rows). Interlaced ones are
left to Pillow (at 8 bits)."""
from __future__ import annotations

import struct
import zlib

import numpy as np

SIGNATURE = b"\x89PNG\r\n\x1a\n"
# colour type -> samples per pixel, for the types Pillow narrows (grey alone it reads at 16 bits)
_CHANNELS = {2: 3, 4: 2, 6: 4}
# samples per pixel -> Pillow's mode and its raw modes taking the high and the low byte of each
# sample (grey with alpha: one 32-bit integer per pixel, both samples whole)
_PILLOW = {3: ("RGB", ("RGB;16B", "RGB;16L")), 4: ("RGBA", ("RGBA;16B", "RGBA;16L")), 2: ("I", ("I;32B",))}
HEADER_SIZE = 29   # signature, IHDR's length and name, then width .. interlace
MAX_DATA = 1 << 31   # the most inflated bytes decode accepts (the caller's pixel limit is lower)


def wide_colour_channels(head: bytes) -> int | None:
    """Samples per pixel when the file starting with `head` (HEADER_SIZE bytes) is a non-interlaced
    PNG of 16-bit colour or grey-with-alpha samples (Pillow reads grey-with-alpha as RGBA), else None."""
    if len(head) < HEADER_SIZE or not head.startswith(SIGNATURE) or head[12:16] != b"IHDR":
        return None
    depth, colour, interlace = head[24], head[25], head[28]
    return _CHANNELS.get(colour) if depth == 16 and interlace == 0 else None


def _image_data(data: bytes) -> bytes:
    """The IDAT chunks' data, joined; ValueError when a chunk runs past the end or IEND is missing."""
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
            return b"".join(chunks)
        pos += 12 + length


def _check_rows(stream: bytes, height: int, stride: int) -> None:
    """ValueError unless the zlib stream inflates to exactly height rows of a filter byte (0..4) and
    stride bytes; it is inflated no further than that needs."""
    need = height * (stride + 1)
    inflate = zlib.decompressobj()
    try:
        raw = np.frombuffer(inflate.decompress(stream, need + 1), dtype=np.uint8)
    except zlib.error as e:
        raise ValueError(f"PNG: the image data is corrupt ({e})") from e
    rows_need = f"the {need} bytes that {height} rows need"
    if raw.size > need:
        raise ValueError(f"PNG: the image data holds more than {rows_need}")
    if raw.size < need or not inflate.eof:
        raise ValueError(f"PNG: the image data is truncated (it gives {raw.size} of {rows_need})")
    kinds = raw[::stride + 1]
    bad = np.flatnonzero(kinds > 4)
    if bad.size:
        raise ValueError(f"PNG: unknown row filter {kinds[bad[0]]} in row {bad[0] + 1}")


def decode(data: bytes) -> np.ndarray:
    """H x W x C uint16 samples of a file for which wide_colour_channels is not None. A file that is
    cut short or corrupt raises ValueError saying what is wrong."""
    from PIL import Image

    channels = wide_colour_channels(data[:HEADER_SIZE])
    if channels is None:
        raise ValueError("PNG: not a non-interlaced PNG of 16-bit colour samples")
    width, height = struct.unpack(">II", data[16:24])
    if width == 0 or height == 0 or height * (2 * channels * width + 1) > MAX_DATA:
        raise ValueError(f"PNG: the header's size {width} x {height} is empty or over {MAX_DATA >> 30} GiB of samples")
    stream = _image_data(data)
    _check_rows(stream, height, 2 * channels * width)
    mode, raw_modes = _PILLOW[channels]
    parts = [np.asarray(Image.frombytes(mode, (width, height), stream, "zip", raw)) for raw in raw_modes]
    if channels == 2:
        whole = parts[0].view(np.uint32)
        return np.stack([whole >> 16, whole & 0xFFFF], axis=2).astype(np.uint16)
    return (parts[0].astype(np.uint16) << 8) | parts[1]
