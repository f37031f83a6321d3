"""Image files for the Lua `image` package: Pillow decodes and encodes, straight into and out of the
memory of Lua tensors (C x H x W, torch7's layout). Pillow is imported on first use, so the runtime
starts without it; `require 'image'` asks imaging_missing() first."""
from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

import numpy as np

from . import png16
from .memory import lua_list

if TYPE_CHECKING:
    from .runtime import Bridge

# Pillow mode -> (channels, largest sample value): 16-bit PNGs and PGMs with maxval > 255 read as 'I'
_MODES = {"1": (1, 255), "L": (1, 255), "LA": (2, 255), "RGB": (3, 255), "RGBA": (4, 255),
          "I": (1, 65535), "I;16": (1, 65535), "I;16B": (1, 65535)}
# what an unlisted mode is converted to first (palettes, CMYK JPEGs, YCbCr...)
_CONVERT = {"P": "RGB", "PA": "RGBA", "CMYK": "RGB", "YCbCr": "RGB", "F": "I", "LAB": "RGB", "HSV": "RGB"}


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


def _is_png(bridge: "Bridge", source: Any) -> bool:
    """Whether the source starts with PNG's signature (False for a file that cannot be opened)."""
    try:
        return _head(bridge, source, len(png16.SIGNATURE)) == png16.SIGNATURE
    except OSError:
        return False


def _open(bridge: "Bridge", source: Any) -> Any:
    """A Pillow image in a mode of _MODES, from a file name or a ByteTensor of file bytes."""
    from PIL import Image

    data = source if isinstance(source, str) else io.BytesIO(bridge.buffers.tensor_view(source).tobytes())
    img = Image.open(data)
    if img.mode == "P" and "transparency" in img.info:
        img = img.convert("RGBA")
    if img.mode not in _MODES:
        img = img.convert(_CONVERT.get(img.mode, "RGB"))
    return img


def _layout(bridge: "Bridge", source: Any, img: Any) -> tuple[int, int, bool]:
    """Channels, the largest sample value, and whether png16 decodes the file (a 16-bit colour
    PNG, which Pillow would give at 8 bits)."""
    if img.format == "PNG":
        wide = png16.wide_colour_channels(_head(bridge, source, png16.HEADER_SIZE))
        if wide:
            return wide, 65535, True
    channels, top = _MODES[img.mode]
    return channels, top, False


def callbacks(bridge: "Bridge") -> dict:
    def image_info(source: Any) -> Any:
        """format, channels, height, width; or nil, message when Pillow cannot read it."""
        from PIL.Image import DecompressionBombError, UnidentifiedImageError

        try:
            img = _open(bridge, source)
        except (OSError, UnidentifiedImageError, SyntaxError, DecompressionBombError) as e:
            in_memory = not isinstance(source, str)   # Pillow's message would name a BytesIO object
            reason = "cannot identify an image in the bytes" if in_memory and isinstance(
                e, UnidentifiedImageError) else str(e)
            if _is_png(bridge, source):
                return None, f"Error during init_io ({reason})"   # torch7's message for any unreadable PNG
            return None, reason
        fmt = (img.format or "").upper() or None
        if fmt == "PPM" and img.mode == "1":   # Pillow names bitmaps (P1, P4) PPM too
            fmt = "PBM"
        channels, _, _ = _layout(bridge, source, img)
        return fmt, channels, img.height, img.width

    def image_decode(source: Any, dst: Any) -> str | None:
        """Decodes into dst (channels x height x width, from image_info): a byte tensor gets 0..255
        (16-bit samples keep their high byte, as libpng's strip_16), a float tensor [0, 1].
        Returns what is wrong when the pixel data cannot be decoded (a truncated file...)."""
        img = _open(bridge, source)
        channels, top, wide = _layout(bridge, source, img)
        try:
            pixels = png16.decode(_head(bridge, source, -1)) if wide else np.asarray(img)
        except (OSError, ValueError, SyntaxError) as e:
            return str(e)
        if img.mode == "1":
            pixels = pixels.astype(np.uint8) * 255
        pixels = pixels.reshape(img.height, img.width, channels).transpose(2, 0, 1)
        out = bridge.buffers.tensor_view(dst)
        if out.dtype == np.uint8:
            out[...] = pixels >> 8 if top == 65535 else pixels
        else:
            np.multiply(pixels, 1.0 / top, out=out, casting="unsafe")
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
            "image_encode": image_encode, "image_text": image_text}

