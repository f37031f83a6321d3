"""image.load on every kind of PNG and JPEG torch7's image read (palettes, grey with alpha, CMYK
and YCCK), and on hostile files: decompression bombs refused from the header (image.maxPixels),
memory and header errors that name the function and the file. Expected pixels are Pillow's own
decoding of each file."""
from __future__ import annotations

import io
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

from fuzz_image import png, png_chunk
from helpers import N, assert_lua_errors, lua_fn

Image = pytest.importorskip("PIL.Image", reason="the image extra (Pillow) is not installed: pip install 'luabridge[image]'")

rng = np.random.default_rng(22)
load = lua_fn("function(fn, p, tensortype) require 'image'; return image[fn](p, nil, tensortype) end")
PILLOW_LIMIT = 89478485   # PIL.Image.MAX_IMAGE_PIXELS, image.maxPixels's default


def rgb_u8(h: int = 9, w: int = 11) -> np.ndarray:
    return rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)


def chw(hwc: np.ndarray) -> np.ndarray:
    return hwc.reshape(hwc.shape[0], hwc.shape[1], -1).transpose(2, 0, 1)


def assert_loads_as(path: Path, expected_hwc: np.ndarray, fn: str = "load") -> None:
    """image[fn] gives expected (0..255 samples) as bytes, and as doubles divided by 255."""
    np.testing.assert_array_equal(N(load(fn, str(path), "byte")), chw(expected_hwc))
    np.testing.assert_allclose(N(load(fn, str(path), "double")), chw(expected_hwc) / 255.0, rtol=1e-15)


# ---------------------------------------------------------------------------------------------
# kinds of file torch7 read


@pytest.mark.parametrize("transparent", [False, True])
@pytest.mark.parametrize("colours,bits", [(2, 1), (4, 2), (16, 4), (200, 8)])
def test_palette_png_expands_to_rgb(tmp_path, colours, bits, transparent):
    """Pillow's quantize output at each palette bit depth, with and without a tRNS chunk: RGB, 3
    channels, as torch7's png.c gave every palette PNG (png_set_expand, depth 3)."""
    path = tmp_path / "p.png"
    Image.fromarray(rgb_u8()).quantize(colours).save(path, **({"transparency": 1} if transparent else {}))
    data = path.read_bytes()
    assert (data[24], data[25], b"tRNS" in data) == (bits, 3, transparent)   # IHDR: bit depth, palette type
    expected = np.asarray(Image.open(path).convert("RGB"))
    assert_loads_as(path, expected)
    assert_loads_as(path, expected, "loadPNG")
    assert N(load("getSize", str(path))).tolist() == [3, 9, 11]


@pytest.mark.parametrize("bits", [1, 2, 4])
def test_low_bit_grey_png_scales_to_bytes(tmp_path, bits):
    """1, 2 and 4-bit grey rows (values packed high bit first) read as 0..255, one channel."""
    width, height = 8, 3
    values = rng.integers(0, 2 ** bits, size=(height, width))
    packed = np.packbits(np.unpackbits(values.astype(np.uint8)[..., None], axis=2)[..., 8 - bits:].reshape(height, -1), axis=1)
    rows = b"".join(b"\0" + row.tobytes() for row in packed)
    (tmp_path / "g.png").write_bytes(png(width, height, bits, 0, rows))
    expected = np.asarray(Image.open(tmp_path / "g.png").convert("L"))
    np.testing.assert_array_equal(expected, values * 255 // (2 ** bits - 1))   # the file is what it claims
    assert_loads_as(tmp_path / "g.png", expected[..., None])


def test_grey_with_alpha_and_grey_with_trns(tmp_path):
    grey_alpha = rng.integers(0, 256, size=(5, 6, 2), dtype=np.uint8)
    Image.fromarray(grey_alpha, "LA").save(tmp_path / "la.png")
    assert_loads_as(tmp_path / "la.png", np.asarray(Image.open(tmp_path / "la.png")))
    Image.fromarray(grey_alpha[..., 0]).save(tmp_path / "t.png", transparency=7)   # a tRNS grey: no alpha plane
    assert b"tRNS" in (tmp_path / "t.png").read_bytes()
    assert_loads_as(tmp_path / "t.png", grey_alpha[..., :1])


def test_interlaced_sixteen_bit_grey_with_alpha_keeps_two_channels(tmp_path):
    """Pillow reads it as RGBA at 8 bits; torch7 gave 2 channels. 1 x 1: Adam7's first pass is
    the whole image."""
    (tmp_path / "ga.png").write_bytes(png(1, 1, 16, 4, b"\0\x12\x34\xab\xcd", interlace=1))
    as_rgba = np.asarray(Image.open(tmp_path / "ga.png"))
    assert as_rgba.shape == (1, 1, 4)
    assert_loads_as(tmp_path / "ga.png", as_rgba[..., [0, 3]])


def adobe_transform(jpeg: bytes, transform: int) -> bytes:
    """jpeg with its Adobe APP14 marker's colour transform set (0: CMYK, 2: YCCK)."""
    at = jpeg.index(b"Adobe") + 11   # "Adobe", then version, flags0 and flags1 (2 bytes each)
    return jpeg[:at] + bytes([transform]) + jpeg[at + 1:]


@pytest.mark.parametrize("transform", [0, 2])
def test_cmyk_and_ycck_jpeg_convert_to_rgb(tmp_path, transform):
    buf = io.BytesIO()
    Image.fromarray(rgb_u8(16, 16)).convert("CMYK").save(buf, "JPEG", quality=95)
    path = tmp_path / "c.jpg"
    path.write_bytes(adobe_transform(buf.getvalue(), transform))
    with Image.open(path) as img:
        assert (img.mode, img.info["adobe_transform"]) == ("CMYK", transform)
        expected = np.asarray(img.convert("RGB"))
    assert_loads_as(path, expected)
    assert_loads_as(path, expected, "loadJPG")
    decompressed = lua_fn("function(p) require 'image'; local f = io.open(p, 'rb'); local s = f:read('*a'); f:close()"
                          "; return image.decompressJPG(torch.ByteTensor(torch.ByteStorage():string(s)), nil, 'byte') end")
    np.testing.assert_array_equal(N(decompressed(str(path))), chw(expected))


# ---------------------------------------------------------------------------------------------
# decompression bombs


def jpeg_declaring(width: int, height: int) -> bytes:
    """An 8 x 8 JPEG whose SOF header says width x height (libjpeg fills the rest: it loads)."""
    buf = io.BytesIO()
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(buf, "JPEG")
    data = bytearray(buf.getvalue())
    sof = data.index(b"\xff\xc0")
    data[sof + 5:sof + 9] = struct.pack(">HH", height, width)
    return bytes(data)


def png_bomb(side: int) -> bytes:
    """A whole side x side RGB PNG of zeros: 9500 gives the issue's 263 KB file (2.7 GB loaded)."""
    deflate, row = zlib.compressobj(9), bytes(1 + 3 * side)
    body = b"".join(deflate.compress(row) for _ in range(side)) + deflate.flush()
    return png(side, side, 8, 2, b"")[:33] + png_chunk(b"IDAT", body) + png_chunk(b"IEND", b"")


def test_bombs_are_refused_from_the_header(tmp_path):
    (tmp_path / "bomb.jpg").write_bytes(jpeg_declaring(12000, 12000))
    (tmp_path / "bomb.png").write_bytes(png_bomb(9500))
    assert (tmp_path / "bomb.jpg").stat().st_size < 1000 and (tmp_path / "bomb.png").stat().st_size < 300_000
    (tmp_path / "bomb.ppm").write_bytes(b"P6\n100000 100000\n255\n\0\0\0")
    refused = r"%s: cannot read .*bomb.%s: its header declares %s pixels .*more than image.maxPixels \(89478485\)"
    assert_lua_errors([
        (f"function(p) require 'image'; image.{fn}(p .. '/bomb.{ext}') end", refused % (f"image.{fn}", ext, size))
        for fn, ext, size in [("load", "jpg", "12000 x 12000"), ("loadJPG", "jpg", "12000 x 12000"),
                              ("load", "png", "9500 x 9500"), ("loadPNG", "png", "9500 x 9500"),
                              ("load", "ppm", "100000 x 100000"), ("loadPPM", "ppm", "100000 x 100000")]
    ] + [("function(p) require 'image'; local f = io.open(p .. '/bomb.jpg', 'rb'); local s = f:read('*a'); f:close()"
          "; image.decompress(torch.ByteTensor(torch.ByteStorage():string(s))) end",
          r"image.decompress: cannot read the bytes: its header declares 12000 x 12000")], str(tmp_path))
    # the size alone is still read
    assert N(load("getSize", str(tmp_path / "bomb.jpg"))).tolist() == [3, 12000, 12000]


def test_max_pixels_is_the_limit_and_can_be_raised(tmp_path):
    Image.fromarray(rgb_u8(10, 11)).save(tmp_path / "a.png")
    with_limit = lua_fn("function(limit, p) require 'image'; local old = image.maxPixels; image.maxPixels = limit"
                        "; local ok, r = pcall(image.load, p, nil, 'byte'); image.maxPixels = old"
                        "; if not ok then error(r, 0) end; return r end")
    expected = chw(np.asarray(Image.open(tmp_path / "a.png")))
    for limit in (110, 1e9, float("inf")):
        np.testing.assert_array_equal(N(with_limit(limit, str(tmp_path / "a.png"))), expected)
    assert_lua_errors([
        ("function(p) require 'image'; local old = image.maxPixels; image.maxPixels = 109"
         "; local ok, e = pcall(image.load, p); image.maxPixels = old; error(e, 0) end",
         r"image.load: cannot read .*a.png: its header declares 11 x 10 pixels \(110\), more than image.maxPixels \(109\)"
         ".*set image.maxPixels higher"),
        ("function(p) require 'image'; local old = image.maxPixels; image.maxPixels = 'lots'"
         "; local ok, e = pcall(image.load, p); image.maxPixels = old; error(e, 0) end",
         r"image.load: image.maxPixels must be a number of pixels \(math.huge: no limit\), got lots"),
    ], str(tmp_path / "a.png"))
    assert lua_fn("function() require 'image'; return image.maxPixels end")() == PILLOW_LIMIT


def test_pillows_own_global_limit_is_not_consulted(tmp_path, monkeypatch):
    """image.maxPixels replaces PIL.Image.MAX_IMAGE_PIXELS: raising the one must not leave the other
    refusing (Pillow refuses at twice its value), and the host's setting is left as it is."""
    from PIL import PngImagePlugin

    Image.fromarray(rgb_u8(5, 6)).save(tmp_path / "a.png")
    expected = np.asarray(Image.open(tmp_path / "a.png"))
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 10)
    with pytest.raises(Image.DecompressionBombError):
        Image.open(tmp_path / "a.png")
    np.testing.assert_array_equal(N(load("load", str(tmp_path / "a.png"), "byte")), chw(expected))
    assert Image.MAX_IMAGE_PIXELS == 10 and PngImagePlugin.PngImageFile is not None


# ---------------------------------------------------------------------------------------------
# errors name the function and the file


def test_pnm_header_errors_name_the_function_and_file(tmp_path):
    (tmp_path / "zero.pgm").write_bytes(b"P5\n3 2\n0\n" + bytes(6))
    (tmp_path / "cut.pgm").write_bytes(b"P5\n3 ")
    (tmp_path / "pfm.ppm").write_bytes(b"Pf\n1 1\n-1.0\n" + bytes(4))
    assert_lua_errors([
        (f"function(p) require 'image'; image.{fn}(p .. '/{name}') end", f"image.{fn}: cannot read .*{name}: {why}")
        for fn in ("load", "loadPPM")
        for name, why in [("zero.pgm", "maxval must be greater than 0"), ("cut.pgm", "Reached EOF while reading header")]
    ] + [("function(p) require 'image'; image.load(p .. '/pfm.ppm') end", r"image.load: unknown image type: ppm \(.*pfm.ppm holds PFM\)"),
         ("function(p) require 'image'; image.loadPPM(p .. '/pfm.ppm') end",
          r"image.loadPPM: unsupported magic number: PFM, not PPM, in .*pfm.ppm")],
        str(tmp_path))


MEMORY_CHILD = r"""
import resource, sys
import luabridge
luabridge.require('torch')
load = luabridge.eval("function(p, t) require 'image'; local ok, e = pcall(image.load, p, nil, t); return tostring(e) end")
size = int(open('/proc/self/statm').read().split()[0]) * resource.getpagesize()
cap = size + (int(sys.argv[3]) << 20)
resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
print(load(sys.argv[1], sys.argv[2]))
"""


@pytest.mark.parametrize("tensortype,headroom_mb,where", [
    ("double", 400, "not enough memory for its 3 x 6000 x 6000 pixels as a torch.DoubleTensor"),  # the tensor
    ("byte", 200, "not enough memory to decode its 6000 x 6000 pixels"),   # Pillow's image, after the tensor
])
def test_memory_errors_name_image_load(tmp_path, tensortype, headroom_mb, where):
    """Under an address-space cap a 6000 x 6000 JPEG (under image.maxPixels) fails as image.load,
    naming the file, whether the tensor (0.9 GB of doubles) or Pillow's decoding does not fit."""
    (tmp_path / "big.jpg").write_bytes(jpeg_declaring(6000, 6000))
    out = subprocess.run([sys.executable, "-c", MEMORY_CHILD, str(tmp_path / "big.jpg"), tensortype, str(headroom_mb)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"image.load: cannot " in out.stdout and "big.jpg: " + where in out.stdout, out.stdout


def test_depth_conversion_out_of_memory_names_image_load(tmp_path):
    """Depth 1 converts a colour image with image.rgb2y after decoding; numpy's own words when that
    cannot allocate ("Unable to allocate ...") become image.load's, naming the file."""
    Image.fromarray(rgb_u8()).save(tmp_path / "a.png")
    assert_lua_errors([
        ("function(p) require 'image'; local rgb2y = image.rgb2y"
         "; image.rgb2y = function() error('Unable to allocate 2.1 GiB for an array', 0) end"
         "; local ok, e = pcall(image.load, p, 1); image.rgb2y = rgb2y; error(e, 0) end",
         r"image.load: cannot make .*a.png depth 1: not enough memory for its 11 x 9 pixels"),
        ("function(p) require 'image'; image.load(p, 2) end", r"image.load: depth must be 1 or 3, got 2"),
    ], str(tmp_path / "a.png"))


def progressive_with_scans(scans: int) -> bytes:
    """A 64 x 64 progressive JPEG with its last scan repeated until it has `scans` scans (libjpeg
    only warns about the repeats and decodes each: a CPU bomb in a small file)."""
    buf = io.BytesIO()
    Image.fromarray(rgb_u8(64, 64)).save(buf, "JPEG", progressive=True)
    data = buf.getvalue()
    last = data[data.rindex(b"\xff\xda"):-2]   # the last SOS segment and its data, before EOI
    return data[:-2] + last * (scans - data.count(b"\xff\xda")) + data[-2:]


def test_jpeg_of_too_many_scans_is_refused(tmp_path):
    (tmp_path / "many.jpg").write_bytes(progressive_with_scans(101))
    (tmp_path / "most.jpg").write_bytes(progressive_with_scans(100))
    assert_lua_errors([("function(p) require 'image'; image.loadJPG(p .. '/many.jpg') end",
                        r"image.loadJPG: cannot decode .*many.jpg: JPEG: 101 scans, more than the 100")], str(tmp_path))
    with Image.open(tmp_path / "most.jpg") as img:
        expected = np.asarray(img)
    np.testing.assert_array_equal(N(load("loadJPG", str(tmp_path / "most.jpg"), "byte")), chw(expected))
    assert N(load("getSize", str(tmp_path / "many.jpg"))).tolist() == [3, 64, 64]   # the header is read
