"""Image files for the Lua `image` package: Pillow decodes and encodes, straight into and out of the
memory of Lua tensors (C x H x W, torch7's layout). Pillow is imported on first use, so the runtime
starts without it; `require 'image'` asks imaging_missing() first."""
from __future__ import annotations

import ctypes
import io
import threading
import warnings
from typing import TYPE_CHECKING, Any

import numpy as np

from . import png16
from ...core.memory import lua_list

if TYPE_CHECKING:
    from ...core.runtime import Bridge

# Pillow mode -> (channels, largest sample value), as torch7's image gives them: palettes expanded
# to RGB (3 channels, with or without transparency: torch7's png.c reads every palette PNG as 3),
# CMYK and YCCK JPEGs (Pillow gives YCCK as CMYK) converted to RGB; 16-bit PNGs and PGMs with
# maxval > 255 read as 'I'
_MODES = {"1": (1, 255), "L": (1, 255), "LA": (2, 255), "RGB": (3, 255), "RGBA": (4, 255),
          "P": (3, 255), "PA": (3, 255), "CMYK": (3, 255),
          "I": (1, 65535), "I;16": (1, 65535), "I;16B": (1, 65535)}
_TO_RGB = ("P", "PA", "CMYK")
# the formats image reads, by their first bytes (PPM and PGM: plain and raw, as torch7's ppm.c)
_MAGIC = ((png16.SIGNATURE, "PNG"), (b"\xff\xd8\xff", "JPEG"),
          (b"P2", "PPM"), (b"P3", "PPM"), (b"P5", "PPM"), (b"P6", "PPM"))
# what Pillow names a PPM file of another kind, by its mode (torch7's ppm.c reads neither)
_PPM_VARIANTS = {"1": "PBM", "F": "PFM"}
_PNG_GREY_ALPHA = 4   # an IHDR colour type; Pillow reads interlaced 16-bit ones as RGBA
# The most scans a JPEG may have. libjpeg's progressive scripts write 6 to 10; each scan is a pass
# over the whole image, and libjpeg only warns about repeated ones, so a 38 KB file of 1000 scans
# of 2000 x 2000 pixels takes 17 s (TurboJPEG suggests a limit of 500; this is 10 times a real one).
MAX_JPEG_SCANS = 100
# Pillow modes decoded straight into a buffer of ours (Pillow's own memory for RGB is R, G, B, X
# per pixel, which the mapped mode RGBX lays out alike): mode -> (mapped mode, bytes per pixel)
_MAPPED = {"L": ("L", 1), "RGB": ("RGBX", 4), "RGBA": ("RGBA", 4)}
# each thread keeps its decoding buffer (a loader decodes image after image of one size) up to
# this size; a bigger image gets a buffer of its own
SCRATCH_MAX = 8 << 20
_scratch = threading.local()
# element sizes of the tensors image_decode_into writes (bytes, floats, doubles)
_DTYPE_OF_SIZE = {1: np.dtype(np.uint8), 4: np.dtype(np.float32), 8: np.dtype(np.float64)}


def missing() -> str | None:
    """None when Pillow imports, else what to install."""
    try:
        import PIL.Image  # noqa: F401
    except ImportError:
        return "image: Pillow is not installed; install the extra: pip install 'luabridge[image]'"
    return None


def _head(bridge: "Bridge", source: Any, size: int) -> bytes:
    """The first bytes (all of them for size -1) of a file name's file or of a ByteTensor of file bytes."""
    if isinstance(source, str):
        with open(source, "rb") as f:
            return f.read(size)
    view = bridge.buffers.tensor_view(source)
    return (view if size < 0 else view[:size]).tobytes()


def _readable_format(head: bytes) -> str | None:
    return next((fmt for magic, fmt in _MAGIC if head.startswith(magic)), None)


def _data(bridge: "Bridge", source: Any) -> Any:
    """What Pillow opens: the file name, or the tensor's bytes as a file."""
    return source if isinstance(source, str) else io.BytesIO(_head(bridge, source, -1))


def _open(bridge: "Bridge", source: Any, fmt: str | None) -> Any:
    """The Pillow image of a file of a format image reads, its header read, nothing decoded. The
    format's reader is called directly: Image.open would check the size against Pillow's own
    global limit, which image.maxPixels replaces (and then warn or refuse on its own terms)."""
    from PIL import JpegImagePlugin, PngImagePlugin, PpmImagePlugin

    reader = {"PNG": PngImagePlugin.PngImageFile, "JPEG": JpegImagePlugin.JpegImageFile,
              "PPM": PpmImagePlugin.PpmImageFile}.get(fmt)
    if reader is None:   # the file changed since its header was read
        raise ValueError("not a PNG, JPEG, PPM or PGM file")
    return reader(_data(bridge, source))


def _foreign_format(bridge: "Bridge", source: Any) -> str | None:
    """The name of a format Pillow knows and image does not read (BMP, PBM, PFM...), for the error."""
    from PIL import Image

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with Image.open(_data(bridge, source)) as img:
                return _PPM_VARIANTS.get(img.mode, "PPM variant") if img.format == "PPM" else img.format
    except Exception:  # anything Pillow cannot open is simply no known format
        return None


def _reason(e: BaseException, height: int = 0, width: int = 0) -> str:
    """What an exception from Pillow or png16 says, never empty (a MemoryError says nothing)."""
    if isinstance(e, MemoryError):
        return f"not enough memory to decode its {width} x {height} pixels"
    return str(e) or type(e).__name__


def _layout(bridge: "Bridge", source: Any, img: Any) -> tuple[int, int, bool]:
    """Channels, the largest sample value, and whether png16 decodes the file (a 16-bit colour
    PNG, which Pillow would give at 8 bits). ValueError for a mode image does not read (PFM's floats)."""
    if img.format == "PNG":
        head = _head(bridge, source, png16.HEADER_SIZE)
        wide = png16.wide_colour_channels(head)
        if wide:
            return wide, 65535, True
        if len(head) == png16.HEADER_SIZE and head[25] == _PNG_GREY_ALPHA:
            return 2, _MODES[img.mode][1], False
    if img.mode not in _MODES:
        raise ValueError(f"unsupported {img.format} image mode {img.mode}")
    channels, top = _MODES[img.mode]
    return channels, top, False


def check_scans(data: bytes) -> None:
    """ValueError for a JPEG of more than MAX_JPEG_SCANS scans. Counting FF DA counts every SOS
    marker (entropy-coded data never holds it: an FF there is followed by 00 or a restart)."""
    scans = data.count(b"\xff\xda")
    if scans > MAX_JPEG_SCANS:
        raise ValueError(f"JPEG: {scans} scans, more than the {MAX_JPEG_SCANS} image decodes "
                         "(a progressive JPEG has about 10; each is a pass over the whole image)")


def _scratch_bytes(n: int) -> np.ndarray:
    """n bytes of this thread's decoding buffer (grown when too small, kept up to SCRATCH_MAX)."""
    buf = getattr(_scratch, "buf", None)
    if buf is None or buf.size < n:
        buf = np.empty(n, dtype=np.uint8)
        if n <= SCRATCH_MAX:
            _scratch.buf = buf
    return buf[:n]


def _decode_mapped(img: Any) -> np.ndarray:
    """The H x W x C samples (C: 1, 3 or 4; a view) of an opened image of a mode in _MAPPED,
    decoded by Pillow straight into this thread's buffer: Pillow's decoder runs without the GIL,
    and no copy of the pixels is made on the way out (np.asarray(img) would copy them through
    Image.tobytes, holding the GIL). The result is valid until the thread decodes again."""
    from PIL import Image

    mapped, bands = _MAPPED[img.mode]
    buf = _scratch_bytes(img.width * img.height * bands)
    target = Image.frombuffer(mapped, img.size, buf, "raw", mapped, 0, 1)
    img.im = target.im   # ImageFile.load decodes into the image memory already there
    img.load()
    if img.im is not target.im:   # a reader that made its own memory (a mapped raw PPM file)
        return np.asarray(img).reshape(img.height, img.width, -1)
    return buf.reshape(img.height, img.width, bands)[..., :_MODES[img.mode][0]]


def _pixels(bridge: "Bridge", source: Any, img: Any) -> tuple[np.ndarray, int]:
    """The decoded H x W x C samples of an image from _open and their largest value."""
    channels, top, wide = _layout(bridge, source, img)
    if img.format == "JPEG":
        check_scans(_head(bridge, source, -1))
    if wide:
        return png16.decode(_head(bridge, source, -1)), top
    mode = img.mode
    if mode in _MAPPED and img.width and img.height:
        pixels = _decode_mapped(img)
    else:
        pixels = np.asarray(img.convert("RGB") if mode in _TO_RGB else img)
    if mode == "1":
        pixels = pixels.astype(np.uint8) * 255
    pixels = pixels.reshape(img.height, img.width, -1)
    if pixels.shape[2] != channels:   # grey with alpha that Pillow read as RGBA: grey is R
        pixels = pixels[..., [0, 3]]
    return pixels, top


def _store(pixels: np.ndarray, top: int, out: np.ndarray) -> None:
    """H x W x C samples (largest value top) into a C x H x W tensor: a byte tensor gets 0..255
    (16-bit samples keep their high byte, as libpng's strip_16), a float tensor [0, 1]."""
    pixels = pixels.transpose(2, 0, 1)
    if out.dtype == np.uint8:
        out[...] = pixels >> 8 if top == 65535 else pixels
    else:
        np.multiply(pixels, 1.0 / top, out=out, casting="unsafe")


def _memory(hi: int, lo: int, nbytes: int) -> Any:
    """The nbytes of memory at address hi * 2**32 + lo (Lua's, alive for the call), uncopied."""
    return (ctypes.c_char * nbytes).from_address((int(hi) << 32) + int(lo))


def decode_into(fmt: str, src_hi: int, src_lo: int, nbytes: int, dst_hi: int, dst_lo: int,
                channels: int, height: int, width: int, itemsize: int) -> Any:
    """image's fast path (lua/image/files.lua): decodes the nbytes of a JPEG or an 8-bit grey, RGB
    or RGBA PNG at one address into the contiguous channels x height x width tensor of itemsize
    (1: bytes, 4: floats, 8: doubles) at another, whose header Lua has already read (the size
    checked against image.maxPixels, the JPEG's scans counted). Returns True when decoded; what
    is wrong when the pixel data cannot be decoded; None when Pillow's reading of the header is
    not Lua's (mode, size) or fails, for Lua to take the general path, which then reports it.
    One call per image, the GIL held only to open the file and wrap the memory."""
    reader = _readers().get(fmt)
    try:
        img = reader(io.BytesIO(ctypes.string_at((int(src_hi) << 32) + int(src_lo), int(nbytes))))
    except Exception:  # noqa: BLE001 - image_info says what is wrong with this header
        return None
    with img:
        if (img.mode not in _MAPPED or _MODES[img.mode][0] != channels
                or (img.height, img.width) != (height, width)):
            return None
        dtype = _DTYPE_OF_SIZE[int(itemsize)]
        out = np.ndarray((channels, height, width), dtype=dtype,
                         buffer=_memory(dst_hi, dst_lo, channels * height * width * dtype.itemsize))
        try:
            _store(_decode_mapped(img), 255, out)
        except Exception as e:  # noqa: BLE001 - a hostile file's data: what the decoder said
            return _reason(e, height, width)
    return True


_fast_readers: dict[str, Any] = {}


def _readers() -> dict[str, Any]:
    """decode_into's readers by format (imported once: an import statement costs a lookup per call)."""
    if not _fast_readers:
        from PIL import JpegImagePlugin, PngImagePlugin

        _fast_readers.update(JPEG=JpegImagePlugin.JpegImageFile, PNG=PngImagePlugin.PngImageFile)
    return _fast_readers


def callbacks(bridge: "Bridge") -> dict:
    def image_info(source: Any) -> Any:
        """format, channels, height, width from the header alone; format and 0s for a format image
        does not read; or nil, what is wrong, and the format the first bytes show (nil if none)."""
        try:
            fmt = _readable_format(_head(bridge, source, 8))
        except OSError as e:
            return None, _reason(e)
        if fmt is None:
            foreign = _foreign_format(bridge, source)
            if foreign:
                return foreign, 0, 0, 0
            return None, "cannot identify an image in the " + ("file" if isinstance(source, str) else "bytes")
        try:
            with _open(bridge, source, fmt) as img:
                channels, _, _ = _layout(bridge, source, img)
                return fmt, channels, img.height, img.width
        except Exception as e:  # whatever a hostile header makes the reader raise is its message
            if fmt == "PNG":
                return None, f"Error during init_io ({_reason(e)})", fmt   # torch7's words for any unreadable PNG
            return None, _reason(e), fmt

    def image_decode(source: Any, dst: Any) -> str | None:
        """Decodes into dst (channels x height x width, from image_info): a byte tensor gets 0..255
        (16-bit samples keep their high byte, as libpng's strip_16), a float tensor [0, 1].
        Returns what is wrong when the pixel data cannot be decoded (a truncated file...)."""
        out = bridge.buffers.tensor_view(dst)
        try:
            with _open(bridge, source, _readable_format(_head(bridge, source, 8))) as img:
                pixels, top = _pixels(bridge, source, img)
                _store(pixels, top, out)
        except Exception as e:  # a hostile file's data: what the decoder said is the message
            return _reason(e, out.shape[1], out.shape[2])
        return None

    def image_encode(path: str | None, src: Any, fmt: str, quality: int) -> bytes | None:
        """Writes a byte tensor (channels x height x width; 1, 2, 3 or 4 channels) as fmt to path,
        or returns the file's bytes when path is nil."""
        from PIL import Image

        pixels = bridge.buffers.tensor_view(src)
        pixels = np.ascontiguousarray(pixels[0] if pixels.shape[0] == 1 else pixels.transpose(1, 2, 0))
        img = Image.fromarray(pixels)
        options = {"quality": int(quality)} if fmt == "JPEG" else {}
        if path is not None:
            img.save(path, fmt, **options)
            return None
        out = io.BytesIO()
        img.save(out, fmt, **options)
        return out.getvalue()

    def image_text(dst: Any, text: str, x: int, y: int, size: int, color: Any, background: Any,
                   wrap: bool) -> None:
        """Draws text with Pillow's built-in bitmap font, scaled by an integer size, onto a
        3 x H x W tensor at column x, row y (0-based); color and background are 0..255 triples
        (background nil: transparent). Wraps at the right edge when wrap is set."""
        from PIL import Image, ImageDraw, ImageFont

        out = bridge.buffers.tensor_view(dst)
        height, width = out.shape[1], out.shape[2]
        font = ImageFont.load_default_imagefont()   # the fixed 6 x 11 bitmap font, not FreeType
        char_w, char_h = 6, 11
        lines: list[tuple[int, int, str]] = []
        cx, cy = x, y
        for ch in text:
            if ch == "\n":
                cx, cy = x, cy + char_h * size
                continue
            if ch == "\r":
                continue
            if wrap and cx + char_w * size >= width:
                cx, cy = 0, cy + char_h * size
            lines.append((cx, cy, ch))
            cx += char_w * size
        if not lines:
            return
        mask = Image.new("L", (char_w * len(lines), char_h))
        draw = ImageDraw.Draw(mask)
        for i, (_, _, ch) in enumerate(lines):
            draw.text((i * char_w, 0), ch, fill=255, font=font)
        glyphs = np.asarray(mask) > 127
        scale = 1.0 if out.dtype == np.uint8 else 1.0 / 255
        fg = np.asarray(lua_list(color), dtype=np.float64) * scale
        bg = None if background is None else np.asarray(lua_list(background), dtype=np.float64) * scale
        for i, (gx, gy, _) in enumerate(lines):
            cell = glyphs[:, i * char_w:(i + 1) * char_w].repeat(size, 0).repeat(size, 1)
            y0, x0 = max(gy, 0), max(gx, 0)
            y1, x1 = min(gy + cell.shape[0], height), min(gx + cell.shape[1], width)
            if y0 >= y1 or x0 >= x1:
                continue
            cell = cell[y0 - gy:y1 - gy, x0 - gx:x1 - gx]
            region = out[:, y0:y1, x0:x1]
            for k in range(3):
                plane = region[k]
                plane[cell] = fg[k]
                if bg is not None:
                    plane[~cell] = bg[k]

    return {"image_missing": missing, "image_info": image_info, "image_decode": image_decode,
            "image_decode_into": decode_into, "image_max_scans": lambda: MAX_JPEG_SCANS,
            "image_encode": image_encode, "image_text": image_text}

