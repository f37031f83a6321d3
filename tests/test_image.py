"""The `image` package against independent references: Pillow for the files, numpy / colorsys /
loops written from torch7's C for the kernels, and the values torch7's own image tests document."""
from __future__ import annotations

import colorsys
import math
import struct
import zlib

import numpy as np
import pytest

import luabridge

from helpers import N, T, assert_lua_errors, lua_fn, require_error_without

Image = pytest.importorskip("PIL.Image", reason="the image extra (Pillow) is not installed: pip install 'luabridge[image]'")

img = lua_fn("function(name, ...) require 'image'; return image[name](...) end")
rng = np.random.default_rng(11)


def chw(hwc: np.ndarray) -> np.ndarray:
    return hwc.transpose(2, 0, 1)


def rgb_u8(h: int = 7, w: int = 9) -> np.ndarray:
    return rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)


# ---------------------------------------------------------------------------------------------
# files


@pytest.mark.parametrize("ext", ["png", "ppm"])
def test_load_lossless_rgb_matches_pillow(tmp_path, ext):
    pixels = rgb_u8()
    path = tmp_path / f"a.{ext}"
    Image.fromarray(pixels).save(path)
    np.testing.assert_array_equal(N(img("load", str(path), None, "byte")), chw(pixels))
    as_float = img("load", str(path), None, "float")
    assert lua_fn("function(t) return torch.typename(t) end")(as_float) == "torch.FloatTensor"
    np.testing.assert_allclose(N(as_float), chw(pixels) / 255, rtol=1e-6)
    np.testing.assert_allclose(N(img("load", str(path))), chw(pixels) / 255)   # default type: double


def test_load_jpeg_matches_pillow_decode(tmp_path):
    pixels = rgb_u8(16, 16)
    path = tmp_path / "a.jpg"
    Image.fromarray(pixels).save(path, quality=90)
    np.testing.assert_array_equal(N(img("load", str(path), 3, "byte")), chw(np.asarray(Image.open(path))))


def test_grey_rgba_and_depth_forcing(tmp_path):
    grey = rng.integers(0, 256, size=(5, 6), dtype=np.uint8)
    Image.fromarray(grey).save(tmp_path / "g.png")
    loaded = N(img("load", str(tmp_path / "g.png"), None, "byte"))
    assert loaded.shape == (1, 5, 6) and (loaded[0] == grey).all()
    three = N(img("load", str(tmp_path / "g.png"), 3, "byte"))
    assert three.shape == (3, 5, 6) and all((three[k] == grey).all() for k in range(3))
    rgba = rng.integers(0, 256, size=(4, 3, 4), dtype=np.uint8)
    Image.fromarray(rgba, "RGBA").save(tmp_path / "a.png")
    assert N(img("load", str(tmp_path / "a.png"), None, "byte")).shape == (4, 4, 3)
    assert N(img("load", str(tmp_path / "a.png"), 3, "byte")).shape == (3, 4, 3)
    # depth 1 of a colour image: its luminance as H x W, as torch7's todepth
    rgb = rgb_u8(4, 5)
    Image.fromarray(rgb).save(tmp_path / "c.png")
    y = N(img("load", str(tmp_path / "c.png"), 1))
    assert y.shape == (4, 5)
    np.testing.assert_allclose(y, (rgb / 255.0) @ np.array([0.299, 0.587, 0.114]), atol=1e-12)


def test_sixteen_bit_and_pgm_values_as_torch7_documents(tmp_path):
    # torch7's test.LoadPNG: gray16-1x2 holds 0 and 65534 -> bytes {0, 255}, floats {0, 65534/65535}
    Image.fromarray(np.array([[0], [65534]], dtype=np.uint16)).save(tmp_path / "g16.png")
    assert N(img("load", str(tmp_path / "g16.png"), 1, "byte")).ravel().tolist() == [0, 255]
    np.testing.assert_allclose(N(img("load", str(tmp_path / "g16.png"), 1, "float")).ravel(), [0, 65534 / 65535],
                               rtol=1e-6)
    # a binary 16-bit PGM (big-endian samples, as netpbm writes them): v / 65535, not torch7's swap
    (tmp_path / "p16.pgm").write_bytes(b"P5\n3 1\n65535\n" + np.array([0, 258, 65535], dtype=">u2").tobytes())
    np.testing.assert_allclose(N(img("load", str(tmp_path / "p16.pgm"), 1, "double")).ravel(),
                               [0, 258 / 65535, 1], rtol=1e-15)
    # test_pgmaload: an ascii PGM with maxval 15, pixel value 3 -> floor(255 * 3 / 15) as a byte
    (tmp_path / "p2.pgm").write_text("P2\n3 2\n15\n0 0 0\n0 3 15\n")
    loaded = N(img("load", str(tmp_path / "p2.pgm"), 1, "byte"))
    assert loaded[0, 1, 1] == math.floor(255 * 3 / 15) and loaded[0, 1, 2] == 255


def png_chunk(name: bytes, data: bytes) -> bytes:
    """A PNG chunk: length, name, data, CRC-32 of name and data."""
    return struct.pack(">I", len(data)) + name + data + struct.pack(">I", zlib.crc32(name + data))


def png_header(width: int, height: int, colour_type: int) -> bytes:
    """The IHDR chunk of a non-interlaced 16-bit PNG."""
    return png_chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 16, colour_type, 0, 0, 0))


def png16_bytes(samples: np.ndarray, colour_type: int, filters: list[int]) -> bytes:
    """A PNG of H x W x C uint16 samples, row y written with PNG filter filters[y % len(filters)]
    (the specification's forward filters; the decoder under test undoes them)."""
    height, width, channels = samples.shape
    bpp = 2 * channels
    raw = samples.astype(">u2").view(np.uint8).reshape(height, width * bpp).astype(np.int64)
    body = bytearray()
    prev = np.zeros(width * bpp, dtype=np.int64)
    for y in range(height):
        cur, kind = raw[y], filters[y % len(filters)]
        left = np.concatenate([np.zeros(bpp, np.int64), cur[:-bpp]])
        upleft = np.concatenate([np.zeros(bpp, np.int64), prev[:-bpp]])
        p = left + prev - upleft
        pa, pb, pc = abs(p - left), abs(p - prev), abs(p - upleft)
        paeth = np.where((pa <= pb) & (pa <= pc), left, np.where(pb <= pc, prev, upleft))
        guess = [0 * cur, left, prev, (left + prev) // 2, paeth][kind]
        body += bytes([kind]) + ((cur - guess) % 256).astype(np.uint8).tobytes()
        prev = cur
    return (b"\x89PNG\r\n\x1a\n" + png_header(width, height, colour_type)
            + png_chunk(b"IDAT", zlib.compress(bytes(body))) + png_chunk(b"IEND", b""))


def test_truncated_pixel_data_names_the_op(tmp_path):
    Image.fromarray(rgb_u8(64, 64)).save(tmp_path / "whole.jpg")   # its header survives the cut
    whole = (tmp_path / "whole.jpg").read_bytes()
    (tmp_path / "cut.jpg").write_bytes(whole[:len(whole) // 2])
    wide = png16_bytes(rng.integers(0, 65536, size=(4, 4, 3), dtype=np.uint16), 2, filters=[4])
    (tmp_path / "cut16.png").write_bytes(wide[:wide.index(b"IDAT") + 20])
    assert_lua_errors([
        ("function(p) require 'image'; image.load(p .. '/cut.jpg') end", "image.load: cannot decode .*cut.jpg: .*truncated"),
        ("function(p) require 'image'; image.load(p .. '/cut16.png') end", "image.load: cannot decode .*cut16.png: .*truncated"),
    ], str(tmp_path))


def with_idat(png: bytes, body: bytes) -> bytes:
    """png (from png16_bytes: one IDAT chunk) with that chunk's data replaced by body."""
    return png[:png.index(b"IDAT") - 4] + png_chunk(b"IDAT", body) + png[png.index(b"IEND") - 4:]


def test_corrupt_sixteen_bit_colour_png_names_what_is_wrong(tmp_path):
    """The 16-bit colour decoder checks what it reads: 2 x 2 RGB rows need 2 * (1 + 2 * 6) = 26
    bytes; more (a small file inflating to 10 MB, read no further than 27), fewer, a stream cut
    short, bytes that are no zlib stream, an unknown filter type, a chunk running past the end,
    and a header size over image.maxPixels are each an error naming the op."""
    good = png16_bytes(np.zeros((2, 2, 3), np.uint16), 2, filters=[0])
    bad = {
        "bomb": with_idat(good, zlib.compress(bytes(10_000_000), 9)),
        "short": with_idat(good, zlib.compress(bytes(25))),
        "cut": with_idat(good, zlib.compress(bytes(26))[:-6]),
        "nozlib": with_idat(good, b"not a zlib stream"),
        "filter": with_idat(good, zlib.compress(bytes([5]) + bytes(25))),
        "past": good[:good.index(b"IEND") - 4] + (1000).to_bytes(4, "big") + good[-8:],
        "huge": good[:8] + png_header(60000, 60000, 2) + good[33:],
    }
    for name, data in bad.items():
        (tmp_path / f"{name}.png").write_bytes(data)
    load = "function(p) require 'image'; image.load(p .. '/%s.png') end"
    assert_lua_errors([
        (load % "bomb", r"image.load: cannot decode .*bomb.png: PNG: the image data holds more than the 26 bytes"),
        (load % "short", r"cannot decode .*short.png: PNG: the image data is truncated \(it gives 25 of the 26 bytes"),
        (load % "cut", r"cannot decode .*cut.png: PNG: the image data is truncated"),
        (load % "nozlib", r"cannot decode .*nozlib.png: PNG: the image data is corrupt"),
        (load % "filter", r"cannot decode .*filter.png: PNG: unknown row filter 5 in row 1"),
        (load % "past", r"cannot decode .*past.png: PNG: the file is truncated \(its IEND chunk of 1000 bytes"),
        (load % "huge", r"image.load: cannot read .*huge.png: its header declares 60000 x 60000 pixels .*image.maxPixels"),
    ], str(tmp_path))


@pytest.mark.parametrize("colour_type,channels", [(2, 3), (6, 4), (4, 2)])
def test_sixteen_bit_colour_png_at_full_depth(tmp_path, colour_type, channels):
    # torch7's test.LoadPNG: rgb16-2x1 loads as v / 65535 in floats and as the high byte in bytes
    samples = rng.integers(0, 65536, size=(6, 7, channels), dtype=np.uint16)
    data = png16_bytes(samples, colour_type, filters=[0, 1, 2, 3, 4, 4])
    (tmp_path / "c16.png").write_bytes(data)
    path = str(tmp_path / "c16.png")
    np.testing.assert_allclose(N(img("load", path, None, "double")), chw(samples) / 65535, rtol=1e-15)
    as_bytes = N(img("load", path, None, "byte"))
    np.testing.assert_array_equal(as_bytes, chw(samples >> 8))
    narrowed = np.asarray(Image.open(path))    # Pillow's 8 bits; grey with alpha as RGBA
    np.testing.assert_array_equal(as_bytes, chw(narrowed[..., [0, 3]] if channels == 2 else narrowed))
    in_memory = lua_fn("function(p) require 'image'; local f = io.open(p, 'rb'); local s = f:read('*a'); f:close()"
                       "; return image.decompressPNG(torch.ByteTensor(torch.ByteStorage():string(s)), 3, 'float') end")
    np.testing.assert_allclose(N(in_memory(path)), chw(samples[..., :3] if channels > 2 else
                                                        np.repeat(samples[..., :1], 3, axis=2)) / 65535, rtol=1e-6)


def test_save_clamps_rounds_and_pillow_reads_back(tmp_path):
    values = rng.uniform(-0.2, 1.2, size=(3, 6, 5))
    img("save", str(tmp_path / "s.png"), T(values))
    expected = np.floor(np.clip(values, 0, 1) * 255 + 0.5).astype(np.uint8)
    np.testing.assert_array_equal(chw(np.asarray(Image.open(tmp_path / "s.png"))), expected)
    # a byte image is written as it is; PGM takes one channel, PPM three
    grey = rng.integers(0, 256, size=(1, 4, 7), dtype=np.uint8)
    img("save", str(tmp_path / "s.pgm"), T(grey))
    np.testing.assert_array_equal(np.asarray(Image.open(tmp_path / "s.pgm")), grey[0])
    img("save", str(tmp_path / "s.ppm"), T(np.ascontiguousarray(chw(rgb_u8()))))
    smooth = np.ascontiguousarray(np.broadcast_to(np.linspace(0, 1, 32), (3, 32, 32)))
    img("save", str(tmp_path / "s.jpg"), T(smooth))
    back = chw(np.asarray(Image.open(tmp_path / "s.jpg"))) / 255.0
    assert abs(back - smooth).mean() < 0.01


def test_compress_and_decompress_in_memory():
    pixels = np.ascontiguousarray(chw(rgb_u8(12, 10)))
    png = img("compressPNG", T(pixels))
    np.testing.assert_array_equal(N(img("decompressPNG", png, None, "byte")), pixels)
    np.testing.assert_array_equal(N(img("decompress", png, None, "byte")), pixels)
    smooth = np.ascontiguousarray(np.broadcast_to(np.linspace(0, 1, 64), (3, 64, 64)))
    big, small = img("compressJPG", T(smooth), 100), img("compressJPG", T(smooth), 25)
    size = lua_fn("function(t) return t:nElement() end")
    assert size(small) < size(big)
    assert abs(N(img("decompressJPG", big)) - smooth).mean() < 0.01


def test_file_errors(tmp_path):
    Image.fromarray(rgb_u8()).save(tmp_path / "pic", format="BMP")
    Image.fromarray(rgb_u8()).save(tmp_path / "pic.bmp")
    (tmp_path / "bits.pbm").write_bytes(b"P4\n8 1\n\xa5")
    assert_lua_errors([
        ("function(p) require 'image'; image.load(p .. '/missing.png') end", "No such file"),
        ("function(p) require 'image'; image.load(p .. '/pic') end", "unable to determine image type for file"),
        ("function(p) require 'image'; image.load(p .. '/pic.bmp') end", "image.load: unknown image type: bmp"),
        ("function(p) require 'image'; image.loadPPM(p .. '/bits.pbm') end", "image.loadPPM: unsupported magic number"),
        ("function(p) require 'image'; image.loadPNG(p .. '/pic.bmp') end", "image.loadPNG: unsupported magic number"),
        ("function(p) require 'image'; image.load(p .. '/pic.bmp', nil, 'int') end", "tensortype must be"),
        ("function(p) require 'image'; image.save(p .. '/x.gif', torch.rand(3, 2, 2)) end", "unknown image type: gif"),
        ("function(p) require 'image'; image.save(p .. '/x.pgm', torch.rand(3, 2, 2)) end", "only save 1xHxW"),
        ("function(p) require 'image'; image.save(p .. '/x.png', torch.rand(5, 2, 2)) end", "1, 2, 3 or 4 channels"),
    ], str(tmp_path))
    (tmp_path / "junk").write_bytes(b"not an image at all")
    (tmp_path / "folder.png").mkdir()
    assert_lua_errors([("function(p) require 'image'; image.load(p .. '/junk') end",
                        "unable to determine image type for file"),
                       ("function(p) require 'image'; image.load(p .. '/folder.png') end",
                        "image.load: cannot read .*folder.png: .*Is a directory")], str(tmp_path))


def test_corrupt_png_gives_torch7s_message(tmp_path):
    """torch7's PNG reader fails any unreadable PNG with "Error during init_io" (its own test
    looks for it); a zero width in the IHDR chunk stands for the corruption."""
    Image.fromarray(rgb_u8()).save(tmp_path / "ok.png")
    data = bytearray((tmp_path / "ok.png").read_bytes())
    data[16:20] = b"\0\0\0\0"    # IHDR's width, right after the signature and the chunk header
    (tmp_path / "bad.png").write_bytes(bytes(data))
    assert_lua_errors([
        ("function(p) require 'image'; image.load(p .. '/bad.png') end", "image.load: cannot read .*Error during init_io"),
        ("function(p) require 'image'; image.decompressPNG(torch.ByteTensor(torch.ByteStorage():string(io.open(p .. "
         "'/bad.png', 'rb'):read('*a')))) end", "image.decompressPNG: cannot read the bytes: Error during init_io .broken PNG file"),
    ], str(tmp_path))


def test_get_size(tmp_path):
    Image.fromarray(rgb_u8(13, 17)).save(tmp_path / "a.png")
    assert N(img("getSize", str(tmp_path / "a.png"))).tolist() == [3, 13, 17]
    assert img("getPNGsize", str(tmp_path / "a.png")) == (3, 13, 17)


# ---------------------------------------------------------------------------------------------
# scale: torch7's documented values, then loops written from its C kernels


def outer(v: list[float]) -> np.ndarray:
    return np.outer(np.asarray(v, dtype=np.float64), np.asarray(v, dtype=np.float64))


@pytest.mark.parametrize("mode, src, expected", [
    ("bilinear", [1, 2, 4, 2], [1, 1.5, 2, 3, 4, 3, 2]),
    ("bilinear", [1, 2, 4, 2], [1.25, 3, 2.5]),
    ("bicubic", [1, 2, 4, 2], [1, 1.4375, 2, 3.1875, 4, 3.25, 2]),
    ("bicubic", [1, 2, 4, 2], [1, 3.1875, 2]),
])
def test_scale_documented_values(mode, src, expected):
    out = N(img("scale", T(outer(src)), len(expected), len(expected), mode))
    np.testing.assert_allclose(out, outer(expected), atol=1e-12)


def test_scale_byte_documented_values():
    out = img("scale", T(np.array([[0, 1, 32]], dtype=np.uint8)), 4, 1, "bicubic")
    assert N(out).tolist() == [[0, 0, 9, 32]]
    out = img("scale", T(np.array([[1, 2], [2, 3]], dtype=np.uint8)), 3, 3)
    assert N(out).tolist() == [[1, 2, 2], [2, 3, 3], [2, 3, 3]]


def line_linear(src: list[float], n: int) -> list[float]:
    """torch7's scaleLinear_rowcol, one line, written as its loops."""
    m = len(src)
    if n == m:
        return list(src)
    if n > m:
        out = []
        for d in range(n - 1):
            if m == 1:
                out.append(src[0])
                continue
            pos = d * (m - 1) / (n - 1)
            i, f = int(pos), pos - int(pos)
            out.append((1 - f) * src[i] + f * src[i + 1])
        return out + [src[-1]]
    out, i0, f0 = [], 0, 0.0
    for d in range(n):
        pos = (d + 1) * m / n
        i1, f1 = int(pos), pos - int(pos)
        acc, cnt = (1 - f0) * src[i0], 1 - f0
        for k in range(i0 + 1, i1):
            acc, cnt = acc + src[k], cnt + 1
        if i1 < m:
            acc, cnt = acc + f1 * src[i1], cnt + f1
        out.append(acc / cnt)
        i0, f0 = i1, f1
    return out


def line_cubic(src: list[float], n: int) -> list[float]:
    m = len(src)
    if n == m:
        return list(src)
    step = (m - 1) / (n - 1) if n > 1 else m - 1
    out = []
    for d in range(n - 1):
        pos = d * step
        i, x = int(pos), pos - int(pos)
        p1, p2 = src[i], src[i + 1]
        p0 = src[i - 1] if i > 0 else 2 * p1 - p2
        p3 = src[i + 2] if i + 2 < m else 2 * p2 - p1
        out.append(p1 + 0.5 * x * (p2 - p0 + x * (2 * p0 - 5 * p1 + 4 * p2 - p3 + x * (3 * (p1 - p2) + p3 - p0))))
    return out + [src[-1]]


def scale_reference(a: np.ndarray, w: int, h: int, line) -> np.ndarray:
    rows = np.array([line(list(r), w) for r in a])
    return np.array([line(list(c), h) for c in rows.T]).T


@pytest.mark.parametrize("mode, line", [("bilinear", line_linear), ("bicubic", line_cubic)])
@pytest.mark.parametrize("w, h", [(11, 3), (4, 13), (5, 7), (2, 2)])
def test_scale_matches_torch7_loops(mode, line, w, h):
    a = rng.uniform(0, 1, size=(7, 5))
    np.testing.assert_allclose(N(img("scale", T(a), w, h, mode)), scale_reference(a, w, h, line), atol=1e-12)
    planes = rng.uniform(0, 1, size=(3, 6, 4))
    out = N(img("scale", T(planes), w, h, mode))
    for k in range(3):
        np.testing.assert_allclose(out[k], scale_reference(planes[k], w, h, line), atol=1e-12)


@pytest.mark.parametrize("factor", [2, 4])
def test_bilinear_shrink_by_whole_factors_is_pillow_box(factor):
    # shrinking, torch7's bilinear averages each output pixel's span of the input: Pillow's box filter
    a = rng.uniform(0, 1, size=(16, 24)).astype(np.float32)
    box = np.asarray(Image.fromarray(a, "F").resize((24 // factor, 16 // factor), Image.Resampling.BOX))
    np.testing.assert_allclose(N(img("scale", T(a), 24 // factor, 16 // factor)), box, atol=1e-5)


def test_scale_simple_is_nearest_by_truncation():
    a = rng.uniform(0, 1, size=(2, 5, 7))
    out = N(img("scale", T(a), 10, 3, "simple"))
    rows, cols = (np.arange(3) * 5 / 3).astype(int), (np.arange(10) * 7 / 10).astype(int)
    np.testing.assert_array_equal(out, a[:, rows][:, :, cols])


@pytest.mark.parametrize("size, expected", [
    ("64", (3, 32, 64)), (64, (3, 32, 64)), ("^16", (3, 16, 32)), ("20x10", (3, 10, 20)),
    ("*1/4", (3, 10, 20)), ("*0.5", (3, 20, 40)),
])
def test_scale_size_strings(size, expected):
    assert N(img("scale", T(np.zeros((3, 40, 80))), size)).shape == expected


def test_scale_into_destination_and_errors():
    dst = T(np.zeros((2, 3, 4)))
    img("scale", dst, T(np.ones((2, 6, 8))))
    assert (N(dst) == 1).all()
    assert_lua_errors([
        ("function() require 'image'; image.scale(torch.rand(1, 2, 3, 4), 2, 2) end",
         r"image.scale: input must be a 2D or 3D .* got torch.DoubleTensor of size 1x2x3x4"),
        ("function() require 'image'; image.scale(torch.LongTensor(3, 3), 2, 2) end", "Byte, Float or Double"),
        ("function() require 'image'; image.scale(torch.rand(3, 3), 2, 2, 'lanczos') end", "mode must be one of"),
        ("function() require 'image'; image.scale(torch.rand(3, 3), 'big') end", "could not find valid dest size"),
        ("function() require 'image'; image.scale(torch.rand(2, 4, 4), torch.rand(3, 4, 4)) end", "depths do not match"),
        ("function() require 'image'; image.scale(torch.FloatTensor(3, 4, 4), torch.rand(3, 4, 4)) end",
         "destination must be a torch.DoubleTensor"),
    ])


# ---------------------------------------------------------------------------------------------
# crop, translate, flips, rotate


def test_crop_forms_match_slicing():
    a = rng.uniform(0, 1, size=(3, 10, 12))
    np.testing.assert_array_equal(N(img("crop", T(a), 2, 3, 7, 9)), a[:, 3:9, 2:7])
    for fmt, (y, x) in {"c": (3, 4), "tl": (0, 0), "tr": (0, 8), "bl": (6, 0), "br": (6, 8)}.items():
        np.testing.assert_array_equal(N(img("crop", T(a), fmt, 4, 4)), a[:, y:y + 4, x:x + 4], err_msg=fmt)
    dst = T(np.zeros((3, 2, 5)))
    img("crop", dst, T(a), 1, 2)   # the destination's size, from (1, 2)
    np.testing.assert_array_equal(N(dst), a[:, 2:4, 1:6])
    grey = rng.uniform(0, 1, size=(6, 6))
    np.testing.assert_array_equal(N(img("crop", T(grey), "c", 2, 2)), grey[2:4, 2:4])
    assert_lua_errors([
        ("function() require 'image'; image.crop(torch.rand(3, 4, 4), 1, 1, 6, 3) end",
         r"image.crop: crop \(1, 1\) to \(6, 3\) goes outside bounds of src \(4x4\)"),
        ("function() require 'image'; image.crop(torch.rand(3, 4, 4), 'middle', 2, 2) end", "crop format must be"),
        ("function() require 'image'; image.crop(torch.rand(3, 4, 4), 1, 1) end", "give the end point"),
    ])


@pytest.mark.parametrize("dx, dy", [(2, 1), (-3, 2), (0, -4), (20, 0)])
def test_translate_shifts_with_zero_fill(dx, dy):
    a = rng.uniform(0, 1, size=(2, 5, 6))
    expected = np.zeros_like(a)
    for j in range(5):
        for i in range(6):
            if 0 <= i + dx < 6 and 0 <= j + dy < 5:
                expected[:, j + dy, i + dx] = a[:, j, i]
    np.testing.assert_array_equal(N(img("translate", T(a), dx, dy)), expected)


def test_flips_match_numpy():
    a = rng.uniform(0, 1, size=(3, 4, 5))
    np.testing.assert_array_equal(N(img("hflip", T(a))), a[:, :, ::-1])
    np.testing.assert_array_equal(N(img("vflip", T(a))), a[:, ::-1, :])
    np.testing.assert_array_equal(N(img("flip", T(a), 1)), a[::-1])
    grey = rng.uniform(0, 1, size=(4, 5))
    np.testing.assert_array_equal(N(img("hflip", T(grey))), grey[:, ::-1])
    inplace = a.copy()
    t = T(inplace)
    img("vflip", t, t)
    np.testing.assert_array_equal(inplace, a[:, ::-1, :])


def rotate_reference(a: np.ndarray, theta: float, bilinear: bool) -> np.ndarray:
    """torch7's rotate / rotateBilinear loops (C's round: half away from zero)."""
    h, w = a.shape
    xc, yc = (w - 1) / 2, (h - 1) / 2
    out = np.zeros_like(a)
    for j in range(h):
        for i in range(w):
            ri = math.cos(theta) * (i - xc) - math.sin(theta) * (j - yc)
            rj = math.cos(theta) * (j - yc) + math.sin(theta) * (i - xc)
            if not bilinear:
                ii = int(math.copysign(math.floor(abs(ri + xc) + 0.5), ri + xc))
                jj = int(math.copysign(math.floor(abs(rj + yc) + 0.5), rj + yc))
                out[j, i] = a[jj, ii] if 0 <= ii < w and 0 <= jj < h else 0
                continue
            i0, j0 = math.floor(ri + xc), math.floor(rj + yc)
            wi, wj = ri + xc - i0, rj + yc - j0
            i1, j1 = i0 + 1, j0 + 1
            blank = False
            if i1 == w and wi < 0.5:
                i1 = i0
            elif i1 >= w:
                blank = True
            if j1 == h and wj < 0.5:
                j1 = j0
            elif j1 >= h:
                blank = True
            if i0 == -1 and wi > 0.5:
                i0 = i1
            elif i0 < 0:
                blank = True
            if j0 == -1 and wj > 0.5:
                j0 = j1
            elif j0 < 0:
                blank = True
            out[j, i] = 0 if blank else ((1 - wi) * (1 - wj) * a[j0, i0] + wi * (1 - wj) * a[j0, i1]
                                         + (1 - wi) * wj * a[j1, i0] + wi * wj * a[j1, i1])
    return out


@pytest.mark.parametrize("theta", [0.0, 0.3, -1.1, math.pi / 2, 2.5])
def test_rotate_matches_torch7_loops(theta):
    a = rng.uniform(0, 1, size=(9, 8))
    np.testing.assert_allclose(N(img("rotate", T(a), theta)), rotate_reference(a, theta, False), atol=1e-12)
    np.testing.assert_allclose(N(img("rotate", T(a), theta, "bilinear")), rotate_reference(a, theta, True), atol=1e-12)


def test_rotate_quarter_turn_of_a_square_is_rot90():
    a = rng.uniform(0, 1, size=(2, 6, 6))
    np.testing.assert_array_equal(N(img("rotate", T(a), math.pi / 2)), np.rot90(a, k=1, axes=(1, 2)))
    assert_lua_errors([("function() require 'image'; local t = torch.rand(3, 3); image.rotate(t, t, 1) end",
                        "in-place rotate not supported")])


def cubic(p0, p1, p2, p3, x):
    return p1 + 0.5 * x * (p2 - p0 + x * (2 * p0 - 5 * p1 + 4 * p2 - p3 + x * (3 * (p1 - p2) + p3 - p0)))


def lanczos(d):
    d = abs(d)
    if d < 1e-6:
        return 1.0
    return 0.0 if d > 3 else 3 * math.sin(math.pi * d) * math.sin(math.pi * d / 3) / (math.pi ** 2 * d * d)


def warp_reference(a: np.ndarray, flow: np.ndarray, mode: str, pad: bool, pad_value: float) -> np.ndarray:
    """torch7's warp loop (offset mode) on one plane."""
    h, w = a.shape
    out = np.zeros(flow.shape[1:])
    for y, x in np.ndindex(*out.shape):
        iy, ix = y + flow[0, y, x], x + flow[1, y, x]
        if pad and (iy < 0 or iy > h - 1 or ix < 0 or ix > w - 1):
            out[y, x] = pad_value
            continue
        iy, ix = min(max(iy, 0), h - 1), min(max(ix, 0), w - 1)
        y0, x0 = math.floor(iy), math.floor(ix)
        fy, fx = iy - y0, ix - x0
        if mode == "simple":
            out[y, x] = a[math.floor(iy + 0.5), math.floor(ix + 0.5)]
        elif mode == "bilinear":
            y1, x1 = min(y0 + 1, h - 1), min(x0 + 1, w - 1)
            out[y, x] = ((1 - fx) * (1 - fy) * a[y0, x0] + fx * (1 - fy) * a[y0, x1]
                         + (1 - fx) * fy * a[y1, x0] + fx * fy * a[y1, x1])
        elif mode == "bicubic":
            def p(v, u):
                return a[v, u] if 0 <= v < h and 0 <= u < w else pad_value
            rows = [cubic(*(p(y0 + i, x0 + j) for j in (-1, 0, 1, 2)), fx) for i in (-1, 0, 1, 2)]
            out[y, x] = cubic(*rows, fy)
        else:
            total = weights = 0.0
            for v in range(y0 - 2, y0 + 4):
                for u in range(x0 - 2, x0 + 4):
                    wt = lanczos(ix - u) * lanczos(iy - v)
                    total += wt * a[min(max(v, 0), h - 1), min(max(u, 0), w - 1)]
                    weights += wt
            out[y, x] = total / weights
    return out


@pytest.mark.parametrize("mode", ["simple", "bilinear", "bicubic", "lanczos"])
@pytest.mark.parametrize("clamp", ["clamp", "pad"])
def test_warp_matches_torch7_loop(mode, clamp):
    a = rng.uniform(0, 1, size=(7, 8))
    flow = rng.uniform(-2.5, 2.5, size=(2, 5, 6))
    pad_value = 0.25 if clamp == "pad" else None
    args = (T(a), T(flow), mode, True, clamp) + ((pad_value,) if pad_value is not None else ())
    np.testing.assert_allclose(N(img("warp", *args)), warp_reference(a, flow, mode, clamp == "pad", pad_value or 0),
                               atol=1e-9)


def test_affinetransform_shift_and_rotation():
    a = rng.uniform(0, 1, size=(3, 6, 7))
    lua = luabridge.runtime()
    shifted = N(img("affinetransform", T(a), T(np.eye(2)), "simple", lua.table_from([2, -1]), "pad", 0.5))
    expected = np.full_like(a, 0.5)
    expected[:, 2:, :6] = a[:, :4, 1:]   # each pixel samples p - (2, -1)
    np.testing.assert_array_equal(shifted, expected)
    square = rng.uniform(0, 1, size=(5, 5))
    quarter = np.array([[0.0, -1.0], [1.0, 0.0]])   # p samples (-x, y) about the centre: out[y, x] = a[4 - x, y]
    turned = N(img("affinetransform", T(square), T(quarter), "bilinear"))
    np.testing.assert_allclose(turned, np.rot90(square, k=-1), atol=1e-12)
    assert_lua_errors([
        ("function() require 'image'; image.warp(torch.rand(4, 4), torch.rand(3, 4, 4)) end", "field must be a 2 x H x W"),
        ("function() require 'image'; image.warp(torch.rand(4, 4), torch.rand(2, 4, 4), 'area') end", "mode must be one of"),
        ("function() require 'image'; image.warp(torch.rand(4, 4), torch.rand(2, 4, 4), 'simple', true, 'clamp', 1) end",
         "pad_value can only be specified"),
        ("function() require 'image'; image.affinetransform(torch.rand(4, 4), torch.rand(3, 3)) end", "2 x 2 tensor"),
    ])


# ---------------------------------------------------------------------------------------------
# colour spaces


def pixels_rgb(n: int = 40) -> np.ndarray:
    a = rng.uniform(0, 1, size=(3, 1, n))
    a[:, 0, :4] = [[1, 0, 0, 0.5], [0, 1, 0, 0.5], [0, 0, 1, 0.5]]   # primaries and a grey
    return a


def test_hsv_and_hsl_match_colorsys():
    a = pixels_rgb()
    hsv, hsl = N(img("rgb2hsv", T(a))), N(img("rgb2hsl", T(a)))
    for k in range(a.shape[2]):
        r, g, b = a[:, 0, k]
        np.testing.assert_allclose(hsv[:, 0, k], colorsys.rgb_to_hsv(r, g, b), atol=1e-12)
        h, lum, s = colorsys.rgb_to_hls(r, g, b)
        np.testing.assert_allclose(hsl[:, 0, k], [h, s, lum], atol=1e-12)
    np.testing.assert_allclose(N(img("hsv2rgb", T(hsv))), a, atol=1e-12)
    np.testing.assert_allclose(N(img("hsl2rgb", T(hsl))), a, atol=1e-12)


def test_lab_of_reference_colours():
    a = np.array([[[1.0, 1.0, 0.0, 0.5]], [[1.0, 0.0, 0.0, 0.5]], [[1.0, 0.0, 1.0, 0.5]]])   # white red blue grey
    lab = N(img("rgb2lab", T(a)))
    # CIE Lab of sRGB white, red and blue (D65); torch7's matrix gives them to about 0.05
    np.testing.assert_allclose(lab[:, 0, 0], [100, 0, 0], atol=0.05)
    np.testing.assert_allclose(lab[:, 0, 1], [53.24, 80.09, 67.20], atol=0.1)
    np.testing.assert_allclose(lab[:, 0, 2], [32.30, 79.19, -107.86], atol=0.15)
    assert abs(lab[1, 0, 3]) < 0.02 and abs(lab[2, 0, 3]) < 0.02
    b = pixels_rgb()
    np.testing.assert_allclose(N(img("lab2rgb", img("rgb2lab", T(b)))), b, atol=1e-4)   # torch7's tolerance
    assert_lua_errors([("function() require 'image'; image.rgb2lab(torch.ByteTensor(3, 2, 2)) end",
                        "not supported for torch.ByteTensor")])


def test_yuv_and_y():
    a = pixels_rgb()
    yuv = N(img("rgb2yuv", T(a)))
    m = np.array([[0.299, 0.587, 0.114], [-0.14713, -0.28886, 0.436], [0.615, -0.51499, -0.10001]])
    np.testing.assert_allclose(yuv[:, 0, :], m @ a[:, 0, :], atol=1e-12)
    np.testing.assert_allclose(N(img("yuv2rgb", T(yuv))), a, atol=1e-4)   # torch7's rounded inverse
    # torch7's test.rgb2y: the primaries' luminance
    primaries = np.eye(3).reshape(3, 1, 3)
    np.testing.assert_allclose(N(img("rgb2y", T(primaries))), [[[0.299, 0.587, 0.114]]], atol=1e-12)


def test_byte_images_convert_in_0_255():
    a = rng.integers(0, 256, size=(3, 20, 25), dtype=np.uint8)
    hsv = N(img("rgb2hsv", T(a))).astype(np.int64)
    ref = np.array([colorsys.rgb_to_hsv(*(a[(slice(None), *idx)] / 255.0)) for idx in np.ndindex(20, 25)])
    ref = np.floor(ref.T.reshape(3, 20, 25) * 255 + 0.5)
    # byte images convert in float32, as torch7's: a rounding tie may land one level away
    assert abs(hsv - ref).max() <= 1 and (hsv == ref).mean() > 0.99


def test_color_errors():
    assert_lua_errors([
        ("function() require 'image'; image.rgb2hsv(torch.rand(2, 3, 3)) end", "image.rgb2hsv: input needs 3 channels"),
        ("function() require 'image'; image.rgb2yuv(torch.rand(3, 3)) end", "image.rgb2yuv: input must be a 3D"),
    ])


# ---------------------------------------------------------------------------------------------
# kernels


def gaussian_reference(h, w, amplitude=1.0, sigma_h=0.25, sigma_v=0.25, mean_h=0.5, mean_v=0.5, normalize=False):
    u, v = np.arange(1, w + 1), np.arange(1, h + 1)
    du = (u - (mean_h * w + 0.5)) / (sigma_h * w)
    dv = (v - (mean_v * h + 0.5)) / (sigma_v * h)
    g = amplitude * np.exp(-0.5 * (dv[:, None] ** 2 + du[None, :] ** 2))
    return g / g.sum() if normalize else g


def test_gaussian_forms():
    np.testing.assert_allclose(N(img("gaussian", 3)), gaussian_reference(3, 3), atol=1e-12)
    assert abs(N(img("gaussian", 3))[0, 0] - math.exp(-(1 / 0.75) ** 2)) < 1e-12   # a corner, by hand
    named = lua_fn("function() require 'image'; return image.gaussian{width = 7, height = 5, amplitude = 10, "
                   "sigma_horz = 0.2, sigma_vert = 0.3, mean_horz = 0.4, mean_vert = 0.6, normalize = true} end")
    np.testing.assert_allclose(N(named()), gaussian_reference(5, 7, 10, 0.2, 0.3, 0.4, 0.6, True), atol=1e-12)
    # torch7's test.byteGaussian: a byte kernel is the float one rounded and clamped to 0..255
    as_byte = lua_fn("function() require 'image'; return image.gaussian{amplitude = 1000, tensor = torch.ByteTensor(5, 5)} end")
    np.testing.assert_array_equal(N(as_byte()), np.clip(np.floor(gaussian_reference(5, 5, 1000) + 0.5), 0, 255))


def test_gaussian1d_and_laplacian():
    n, sigma = 7, 0.3
    x = (np.arange(1, n + 1) - (0.5 * n + 0.5)) / (sigma * n)
    np.testing.assert_allclose(N(img("gaussian1D", n, sigma)), np.exp(-x ** 2 / 2), atol=1e-12)
    normalized = lua_fn("function() require 'image'; return image.gaussian1D{size = 7, sigma = 0.3, normalize = true} end")
    np.testing.assert_allclose(N(normalized()), np.exp(-x ** 2 / 2) / np.exp(-x ** 2 / 2).sum(), atol=1e-12)
    size, s = 5, 0.2
    i = np.arange(1, size + 1)
    q = ((i - 3) / (s * size)) ** 2 / 2
    total = q[:, None] + q[None, :]
    np.testing.assert_allclose(N(img("laplacian", size, s)), (1 - total) * np.exp(-total), atol=1e-12)


def conv_full(a: np.ndarray, k: np.ndarray) -> np.ndarray:
    out = np.zeros((a.shape[0] + k.shape[0] - 1, a.shape[1] + k.shape[1] - 1))
    for (i, j), v in np.ndenumerate(k):
        out[i:i + a.shape[0], j:j + a.shape[1]] += v * a
    return out


def test_convolve_modes():
    a, k = rng.uniform(size=(8, 9)), rng.uniform(size=(3, 4))
    full = conv_full(a, k)
    np.testing.assert_allclose(N(img("convolve", T(a), T(k), "full")), full, atol=1e-12)
    np.testing.assert_allclose(N(img("convolve", T(a), T(k))), full[2:8, 3:9], atol=1e-12)
    np.testing.assert_allclose(N(img("convolve", T(a), T(k), "same")), full[1:9, 1:10], atol=1e-12)
    planes = rng.uniform(size=(2, 5, 5))
    out = N(img("convolve", T(planes), T(k), "valid"))
    for p in range(2):
        np.testing.assert_allclose(out[p], conv_full(planes[p], k)[2:5, 3:5], atol=1e-12)


def test_kernel_errors():
    assert_lua_errors([
        ("function() require 'image'; image.gaussian(0) end", "image.gaussian: height must be a whole number from 1 on, got 0"),
        ("function() require 'image'; image.gaussian1D{size = -2} end", "image.gaussian1D: size must be .* got -2"),
        ("function() require 'image'; image.laplacian{width = 2.5} end", "image.laplacian: width must be .* got 2.5"),
        ("function() require 'image'; image.convolve(torch.rand(5, 5), torch.rand(7, 7)) end",
         r"image.convolve: input \(5x5\) is smaller than the kernel \(7x7\) in valid mode"),
        ("function() require 'image'; image.convolve(torch.rand(3), torch.rand(2, 2)) end",
         "image.convolve: .*2D or 3D tensors, got torch.DoubleTensor of size 3 and"),
        # an error found inside the encoder still points at the caller's line
        ("function() require 'image'; image.save('x.png', torch.rand(3, 0, 4)) end", r"^\(eval\):1: image.save: image is empty"),
    ])


def test_gaussianpyramid_levels():
    a = rng.uniform(size=(8, 8))
    levels = img("gaussianpyramid", T(a), luabridge.runtime().table_from([1, 0.5]))
    k = gaussian_reference(3, 3, normalize=True)
    first, second = N(levels[1]), N(levels[2])
    np.testing.assert_array_equal(first, a)                   # each level is stored before smoothing
    smooth = conv_full(a, k)[1:9, 1:9]                        # 'same' convolution of the level above
    np.testing.assert_allclose(second, smooth[::2, ::2], atol=1e-12)


def test_lcn_matches_numpy():
    a = rng.uniform(size=(16, 14))
    k = gaussian_reference(5, 5, sigma_h=0.3, sigma_v=0.3, normalize=True)
    z = (a - a.mean()) / a.std(ddof=1)
    valid = (slice(k.shape[0] - 1, a.shape[0]), slice(k.shape[1] - 1, a.shape[1]))
    mean = conv_full(z, k)[valid]
    var = np.maximum(conv_full(z * z, k)[valid] - mean ** 2, 0)
    expected = (z[2:14, 2:12] - mean) / np.maximum(np.sqrt(var), 1)
    np.testing.assert_allclose(N(img("lcn", T(a), T(k))), expected, atol=1e-10)


def test_erode_and_dilate():
    b = (rng.uniform(size=(9, 10)) > 0.4).astype(np.float64)
    kern = np.array([[0, 1, 0], [1, 1, 1], [0, 0, 0]], dtype=np.float64)
    eroded, dilated = N(img("erode", T(b), T(kern))), N(img("dilate", T(b), T(kern)))
    ones = [(i - 1, j - 1) for i, j in zip(*np.nonzero(kern))]
    for y, x in np.ndindex(*b.shape):
        def at(v, u, pad):
            return b[v, u] if 0 <= v < 9 and 0 <= u < 10 else pad
        assert eroded[y, x] == all(at(y - dy, x - dx, 1) for dy, dx in ones)   # the mirrored kernel
        assert dilated[y, x] == any(at(y + dy, x + dx, 0) for dy, dx in ones)


# ---------------------------------------------------------------------------------------------
# colour maps, drawing, display


def jet_reference(n: int) -> np.ndarray:
    four = 4 * np.arange(1, n + 1) / n
    return np.stack([np.clip(np.minimum(four - s, -four + 3 + s), 0, 1) for s in (1.5, 0.5, -0.5)], axis=1)


def test_jet_colormap_and_y2jet():
    np.testing.assert_allclose(N(img("jetColormap", 10)), jet_reference(10), atol=1e-12)
    # torch7's test.y2jet: levels 1..10 coloured by the 10-colour map
    levels = T(np.arange(1, 11, dtype=np.float64))
    np.testing.assert_allclose(N(img("y2jet", levels))[:, 0, :].T, jet_reference(10), atol=1e-12)
    as_bytes = N(img("y2jet", T(np.array([[1, 2], [3, 4]], dtype=np.uint8))))
    np.testing.assert_array_equal(as_bytes.transpose(1, 2, 0).reshape(4, 3), np.floor(jet_reference(4) * 255 + 0.5))


def test_draw_rect_as_torch7_rectangle_test():
    # torch7's test_drawRect: a 1-pixel magenta box from (5, 5) to (10, 20) on a 3 x 24 x 12 image
    for dtype, bg, unit in ((np.uint8, 3, 1), (np.float64, 3 / 255, 1 / 255)):
        out = N(img("drawRect", T(np.full((3, 24, 12), bg, dtype=dtype)), 5, 5, 10, 20, options({"color": [255, 0, 255]})))
        box = np.zeros((24, 12), dtype=bool)
        box[4:20, 4] = box[4:20, 9] = True
        box[4, 4:10] = box[19, 4:10] = True
        for k, c in enumerate((255, 0, 255)):
            np.testing.assert_allclose(out[k][box], c * unit)
            np.testing.assert_allclose(out[k][~box], bg)


def options(d: dict):
    """A Lua table of d (lists as Lua arrays)."""
    lua = luabridge.runtime()
    return lua.table_from({k: lua.table_from(v) if isinstance(v, list) else v for k, v in d.items()})


def test_draw_text_paints_glyph_cells():
    src = np.zeros((3, 30, 40))
    opts = options({"color": [255, 255, 255], "bg": [255, 0, 0], "size": 2})
    out = N(img("drawText", T(src), "Hi", 3, 4, opts))
    assert (src == 0).all()   # not in place
    cells = np.zeros((30, 40), dtype=bool)
    cells[4:4 + 22, 3:3 + 24] = True   # two 6 x 11 glyphs at size 2
    assert (out[:, ~cells] == 0).all()
    white = (out[0] == 1) & (out[1] == 1) & (out[2] == 1)
    red = (out[0] == 1) & (out[1] == 0) & (out[2] == 0)
    assert (white | red)[cells].all() and white[cells].sum() > 20 and red[cells].sum() > 100


def test_drawing_errors():
    assert_lua_errors([
        ("function() require 'image'; image.drawRect(torch.rand(1, 4, 4), 1, 1, 2, 2) end", "3 x H x W"),
        ("function() require 'image'; image.drawRect(torch.rand(3, 4, 4), 1, 1, 2, 2, {color = {1}}) end",
         "image.drawRect: color must be a table of 3 numbers"),
        ("function() require 'image'; image.drawText(torch.rand(3, 4, 4), 'a', 1, 1, {bg = 'red'}) end",
         "image.drawText: bg must be a table of 3 numbers"),
    ])


def test_minmax_and_display_grid():
    a = rng.uniform(-3, 5, size=(4, 5))
    np.testing.assert_allclose(N(lua_fn("function(t) require 'image'; return image.minmax{tensor = t} end")(T(a))),
                               (a - a.min()) / (a.max() - a.min()), atol=1e-12)
    symm = N(lua_fn("function(t) require 'image'; return image.minmax{tensor = t, symm = true} end")(T(a)))
    m = abs(a).max()
    np.testing.assert_allclose(symm, (a + m) / (2 * m), atol=1e-12)
    batch = rng.uniform(0, 1, size=(5, 3, 4, 6))
    grid = N(lua_fn("function(t) require 'image'; return image.toDisplayTensor{input = t, nrow = 3, padding = 2} end")(T(batch)))
    assert grid.shape == (3, 2 * 6, 3 * 8)
    low, high = batch.min(), batch.max()
    for k in range(5):
        r, c = divmod(k, 3)
        np.testing.assert_allclose(grid[:, r * 6 + 1:r * 6 + 5, c * 8 + 1:c * 8 + 7], (batch[k] - low) / (high - low),
                                   atol=1e-12)
    assert (grid[:, 0, :] == 1).all()   # padding takes the largest value


def test_display_writes_png_in_current_folder(tmp_path, monkeypatch, capfd):
    monkeypatch.chdir(tmp_path)
    path = img("display", T(rng.uniform(0, 1, size=(3, 8, 10))))
    assert "no window" in capfd.readouterr().out and path.startswith("image_display_")
    assert Image.open(tmp_path / path).size == (10, 8)


def test_lena_is_a_synthetic_colour_picture():
    lena = N(img("lena"))
    assert lena.shape == (3, 512, 512) and lena.min() >= 0 and lena.max() <= 1
    assert all(lena[k].std() > 0.1 for k in range(3))
    levels = lena * 255
    assert (levels == np.round(levels)).all()   # 8-bit levels, as torch7's picture loaded from a file
    assert N(img("fabio")).shape == (512, 512)


# ---------------------------------------------------------------------------------------------
# without Pillow


def test_require_without_pillow_names_the_extra():
    out = require_error_without("PIL", "image")
    assert "pip install 'luabridge[image]'" in out
