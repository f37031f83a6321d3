"""image's fast path (lua/image/files.lua): JPEGs of 1 or 3 components and 8-bit grey, RGB and
RGBA PNGs have their header read in Lua and are decoded by one Python call straight into the
result tensor (luabridge/imaging.py's decode_into), so that a loader's workers hold the GIL only
briefly. Its pixels are Pillow's own decoding of each file; every other file, and every header
Lua reads differently from Pillow, takes the general path with its messages."""
from __future__ import annotations

import io
import struct
import threading

import numpy as np
import pytest

from helpers import N, lua_fn

Image = pytest.importorskip("PIL.Image", reason="the image extra (Pillow) is not installed: pip install 'luabridge[image]'")

rng = np.random.default_rng(23)

# image[fn](source, depth, tensortype) with py.image_info and py.image_decode counted (the
# general path), and py.image_decode_into (the fast one): returns the image and the three counts
COUNTED = lua_fn("""function(fn, source, depth, tensortype, raw)
  require 'image'
  local py = __luabridge_py
  local counts, saved = {}, {}
  for _, name in ipairs({'image_info', 'image_decode', 'image_decode_into'}) do
    saved[name] = py[name]
    counts[name] = 0
    py[name] = function(...) counts[name] = counts[name] + 1; return saved[name](...) end
  end
  if raw then source = torch.ByteTensor(torch.ByteStorage():string(source)) end
  local ok, img = pcall(image[fn], source, depth, tensortype)
  for name, f in pairs(saved) do py[name] = f end
  if not ok then error(img, 0) end
  return img, counts.image_info, counts.image_decode, counts.image_decode_into
end""")


def smooth(h: int, w: int, channels: int) -> np.ndarray:
    """An image that compresses like a photograph (JPEG's losses stay small)."""
    small = rng.integers(0, 256, size=(4, 4, channels), dtype=np.uint8)
    mode = {1: "L", 3: "RGB", 4: "RGBA"}[channels]
    img = Image.fromarray(small[..., 0] if channels == 1 else small, mode).resize((w, h), Image.BILINEAR)
    return np.asarray(img)


def encoded(pixels: np.ndarray, fmt: str, **options) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, fmt, **options)
    return buf.getvalue()


def pillow_chw(data: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(data)) as img:
        pixels = np.asarray(img)
    return pixels.reshape(pixels.shape[0], pixels.shape[1], -1).transpose(2, 0, 1)


FAST_FILES = [
    ("JPEG", 1, {}), ("JPEG", 3, {}), ("JPEG", 3, {"progressive": True}), ("JPEG", 1, {"progressive": True}),
    ("JPEG", 3, {"subsampling": 0, "quality": 95}),
    ("PNG", 1, {}), ("PNG", 3, {}), ("PNG", 4, {}), ("PNG", 3, {"optimize": True}),
]


@pytest.mark.parametrize("fmt,channels,options", FAST_FILES)
@pytest.mark.parametrize("tensortype", ["byte", "float", "double"])
def test_fast_path_decodes_as_pillow(tmp_path, fmt, channels, options, tensortype):
    data = encoded(smooth(37, 23, channels), fmt, **options)
    path = tmp_path / ("a.jpg" if fmt == "JPEG" else "a.png")
    path.write_bytes(data)
    expected = pillow_chw(data)
    scale = 1 if tensortype == "byte" else 255.0
    for fn, source in [("load", str(path)), ("decompress", data)]:   # bytes reach Lua as a string
        img, infos, decodes, fast = COUNTED(fn, source, None, tensortype, fn == "decompress")
        assert (infos, decodes, fast) == (0, 0, 1), (fn, infos, decodes, fast)
        got = N(img)
        assert got.shape == expected.shape
        if tensortype == "byte":
            np.testing.assert_array_equal(got, expected)
        else:   # as the general path: samples times 1/255 (a double), stored at the tensor's type
            want = (expected * (1.0 / 255)).astype(np.float32 if tensortype == "float" else np.float64)
            np.testing.assert_array_equal(got, want)
            assert got.max() * scale <= 255.0001


def test_fast_path_depths(tmp_path):
    data = encoded(smooth(20, 30, 3), "JPEG")
    (tmp_path / "c.jpg").write_bytes(data)
    grey = encoded(smooth(20, 30, 1), "PNG")
    (tmp_path / "g.png").write_bytes(grey)
    general = lua_fn("function(p, d) require 'image'; local py = __luabridge_py; local f = py.image_decode_into"
                     "; py.image_decode_into = function() return nil end"
                     "; local ok, r = pcall(image.load, p, d, 'double'); py.image_decode_into = f"
                     "; if not ok then error(r, 0) end; return r end")
    for path in (tmp_path / "c.jpg", tmp_path / "g.png"):
        for depth in (1, 3):
            img, infos, decodes, fast = COUNTED("load", str(path), depth, "double")
            assert (infos, decodes, fast) == (0, 0, 1)
            np.testing.assert_array_equal(N(img), N(general(str(path), depth)))   # the general path's answer


@pytest.mark.parametrize("make", ["cmyk_jpeg", "palette_png", "grey_alpha_png", "sixteen_bit_png", "ppm"])
def test_other_files_take_the_general_path(tmp_path, make):
    pixels = smooth(9, 11, 3)
    if make == "cmyk_jpeg":
        buf = io.BytesIO()
        Image.fromarray(pixels).convert("CMYK").save(buf, "JPEG")
        data, name = buf.getvalue(), "a.jpg"
    elif make == "palette_png":
        buf = io.BytesIO()
        Image.fromarray(pixels).quantize(16).save(buf, "PNG")
        data, name = buf.getvalue(), "a.png"
    elif make == "grey_alpha_png":
        data, name = encoded(np.stack([pixels[..., 0], pixels[..., 1]], -1).copy(), "PNG"), "a.png"
    elif make == "sixteen_bit_png":
        buf = io.BytesIO()
        Image.fromarray(pixels[..., 0].astype(np.uint16) * 257).save(buf, "PNG")
        data, name = buf.getvalue(), "a.png"
    else:
        data, name = b"P6\n11 9\n255\n" + pixels.tobytes(), "a.ppm"
    (tmp_path / name).write_bytes(data)
    img, infos, decodes, fast = COUNTED("load", str(tmp_path / name), None, "byte")
    assert (infos, decodes, fast) == (1, 1, 0)
    assert N(img).shape[1:] == (9, 11)


def test_a_header_lua_reads_differently_takes_the_general_path(tmp_path):
    """Two frame headers: Lua takes the first (8 x 8), Pillow's reader the last (a 12000 x 12000
    bomb). decode_into sees Pillow disagree and answers nil; the general path then refuses the
    file from Pillow's size, before anything of that size is allocated."""
    buf = io.BytesIO()
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(buf, "JPEG")
    data = buf.getvalue()
    sof = data.index(b"\xff\xc0")
    length = struct.unpack(">H", data[sof + 2:sof + 4])[0]
    segment = bytearray(data[sof:sof + 2 + length])
    segment[5:9] = struct.pack(">HH", 12000, 12000)
    data = data[:sof + 2 + length] + bytes(segment) + data[sof + 2 + length:]
    with pytest.warns(Image.DecompressionBombWarning), Image.open(io.BytesIO(data)) as img:
        assert img.size == (12000, 12000)
    (tmp_path / "two.jpg").write_bytes(data)
    with pytest.raises(Exception, match=r"image.load: cannot read .*two.jpg: its header declares 12000 x 12000"):
        COUNTED("load", str(tmp_path / "two.jpg"), None, "byte")


def test_decode_into_answers_nil_when_pillow_disagrees():
    """The contract: decode_into decodes only a header that Pillow reads as Lua did."""
    from luabridge.providers.image.codecs import decode_into

    data = encoded(smooth(6, 5, 3), "JPEG")
    src = np.frombuffer(data, np.uint8)
    dst = np.zeros((3, 6, 5), np.float32)

    def call(fmt, channels, height, width, dst=dst, data=data):
        a, d = src.ctypes.data, dst.ctypes.data
        return decode_into(fmt, a >> 32, a & 0xFFFFFFFF, len(data), d >> 32, d & 0xFFFFFFFF,
                           channels, height, width, dst.itemsize)

    assert call("JPEG", 1, 6, 5) is None      # Pillow reads 3 channels
    assert call("JPEG", 3, 5, 6) is None      # and 6 x 5
    assert call("PNG", 3, 6, 5) is None       # not a PNG: its reader fails
    assert not dst.any()
    assert call("JPEG", 3, 6, 5) is True
    np.testing.assert_array_equal(dst, (pillow_chw(data) * (1.0 / 255)).astype(np.float32))


# image.load's error with the fast path as it is, and with decode_into answering nil (the general
# path alone): the message, or false when it loads
ERRORS = lua_fn("""function(p)
  require 'image'
  local py = __luabridge_py
  local fast = py.image_decode_into
  local _, withFast = pcall(image.load, p, nil, 'byte')
  py.image_decode_into = function() return nil end
  local _, general = pcall(image.load, p, nil, 'byte')
  py.image_decode_into = fast
  local function msg(e) return type(e) == 'string' and (e:gsub('^%(eval%):%d+: ', '')) or false end
  return msg(withFast), msg(general)
end""")


def test_broken_files_fail_as_on_the_general_path(tmp_path):
    """Truncated, corrupted and odd files: the fast path fails (or loads) exactly as the general
    path alone does, with its message naming the function and the file."""
    jpeg = encoded(smooth(64, 64, 3), "JPEG")
    png = encoded(smooth(64, 64, 3), "PNG")
    sof = jpeg.index(b"\xff\xc0")
    cases = {
        "cut_scan.jpg": jpeg[:-100], "cut_header.jpg": jpeg[:sof + 4], "cut_half.jpg": jpeg[:len(jpeg) // 2],
        "zero_width.jpg": jpeg[:sof + 7] + b"\0\0" + jpeg[sof + 9:],
        "garbage_scan.jpg": jpeg[:-300] + bytes(range(256))[::-1] + jpeg[-44:],
        "cut.png": png[:len(png) // 2], "cut_ihdr.png": png[:30],
        "bad_crc.png": png[:29] + bytes([png[29] ^ 1]) + png[30:],
        "zero_height.png": png[:20] + b"\0\0\0\0" + png[24:],
    }
    failed = 0
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        with_fast, general = ERRORS(str(tmp_path / name))
        assert with_fast == general, name
        if general:
            failed += 1
            assert f"image.load: cannot " in general and name in general, general
    assert failed >= 6


def test_each_thread_decodes_into_its_own_buffer():
    """Threads decoding at once (as a loader's workers, each with its runtime) get their own
    images: the decoding buffer is per thread."""
    from luabridge.core.runtime import bridge

    files = [encoded(smooth(48, 40, 3), "JPEG") for _ in range(4)]
    expected = [pillow_chw(f) for f in files]
    failures: list[str] = []

    def work(k: int) -> None:
        b = bridge()
        decode = b.lua.eval("function(s) require 'image'; return image.decompressJPG("
                        "torch.ByteTensor(torch.ByteStorage():string(s)), 3, 'byte') end")
        for i in range(30):
            j = (k + i) % len(files)
            got = b.buffers.tensor_view(decode(files[j])).copy()
            if not np.array_equal(got, expected[j]):
                failures.append(f"thread {k} image {j}")

    threads = [threading.Thread(target=work, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures


def test_a_loader_worker_calls_python_about_once_per_sample():
    """fb.resnet.torch-style preprocessing in a pool worker (decode, crop, jitter, normalise,
    flip): after a warm-up, the worker calls into Python (taking the GIL the other workers may
    be waiting for) about once per sample, to decode it; its tensors come from buffers its
    runtime reuses (torch.memory.reuse)."""
    lua = lua_fn("""function(jpg)
      require 'image'
      local threads = require 'threads'
      local pool = threads.Threads(1, function()
        require 'image'
        local py = __luabridge_py
        calls = {}
        for name, f in pairs(py) do
          if type(f) ~= 'table' then
            py[name] = function(...) calls[name] = (calls[name] or 0) + 1; return f(...) end
          end
        end
      end)
      local function samples(jpg, n)
        for _ = 1, n do
          local img = image.decompressJPG(jpg, 3, 'float')
          local x, y = torch.random(0, 32), torch.random(0, 32)
          img = image.crop(img, x, y, x + 128, y + 128)
          local grey = img.new():resizeAs(img):copy(img):mul(0.5)
          img = img:mul(1.2):add(-0.2, grey)
          for c = 1, 3 do img[c]:add(-0.45):div(0.225) end
          if torch.uniform() < 0.5 then img = image.hflip(img) end
        end
      end
      local got
      pool:addjob(function()
        samples(jpg, 100)   -- warm-up: the sizes' first buffers, a collection or two
        local before = {}
        for k, v in pairs(calls) do before[k] = v end
        samples(jpg, 200)
        local made = {}
        for k, v in pairs(calls) do if v ~= (before[k] or 0) then made[k] = v - (before[k] or 0) end end
        return made
      end, function(made) got = made end)
      pool:synchronize()
      pool:terminate()
      return got
    end""")
    data = encoded(smooth(160, 160, 3), "JPEG")   # 1.5 MB of tensors a sample: a collection every 40
    made = lua(lua_fn("function(s) return torch.ByteTensor(torch.ByteStorage():string(s)) end")(data))
    made = {k: made[k] for k in made}
    assert made.get("image_decode_into") == 200 and "image_info" not in made and "image_decode" not in made
    # allocations and releases: at most one every other sample (how many depends on when the collector
    # runs), not the five to ten a sample the worker made before; nothing else
    assert set(made) <= {"image_decode_into", "alloc", "release"} and sum(made.values()) <= 200 + 100, made
