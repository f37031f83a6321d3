"""require 'graphicsmagick' (clementfarabet/graphicsmagick's Image API) on Pillow: what comes out is
checked against Pillow's own decoding and numpy (means for a Box halving, flips, crops, Rec. 601
intensity, gamma), files and blobs round trip, and bad input is a clear error. The package's own
test scripts run in the corpus (tools/corpus/core.toml)."""
from __future__ import annotations

import io

import numpy as np
import pytest
from helpers import run_script

import luabridge

Image = pytest.importorskip("PIL.Image", reason="the image extra (Pillow) is not installed")


@pytest.fixture(scope="module")
def gm(lua):
    lua.execute("gm = require 'graphicsmagick'")
    return lua


@pytest.fixture
def photo(tmp_path, rng):
    pixels = rng.integers(0, 256, (6, 8, 3), dtype=np.uint8)
    path = tmp_path / "p.png"
    Image.fromarray(pixels).save(path)
    return path, pixels


def tensor(lua, code):
    return luabridge.to_numpy(lua.eval(code))


def test_load_to_tensor_in_both_layouts_and_types(gm, photo):
    path, pixels = photo
    np.testing.assert_array_equal(tensor(gm, f"gm.Image('{path}'):toTensor('byte', 'RGB', 'HWD')"), pixels)
    np.testing.assert_array_equal(tensor(gm, f"gm.Image('{path}'):toTensor('byte', 'RGB', 'DHW')"),
                                  pixels.transpose(2, 0, 1))
    np.testing.assert_allclose(tensor(gm, f"gm.load('{path}')"), pixels.transpose(2, 0, 1) / 255.0, atol=1e-6)
    bgr = tensor(gm, f"gm.Image('{path}'):toTensor('double', 'BGR', 'HWD')")
    np.testing.assert_allclose(bgr, pixels[:, :, ::-1] / 255.0, atol=1e-6)
    intensity = tensor(gm, f"gm.Image('{path}'):toTensor('double', 'I', 'HWD')")[:, :, 0]
    np.testing.assert_allclose(intensity, pixels.astype(float) @ [0.299, 0.587, 0.114] / 255.0, atol=1e-6)
    assert gm.eval(f"{{gm.Image('{path}'):size()}}")[1] == 8


def test_box_halving_flip_flop_crop_and_gamma(gm, photo):
    path, pixels = photo
    src = pixels.astype(np.float64) / 255.0
    half = tensor(gm, f"gm.Image('{path}'):size(4, 3, 'Box'):toTensor('double', 'RGB', 'HWD')")
    np.testing.assert_allclose(half, src.reshape(3, 2, 4, 2, 3).mean(axis=(1, 3)), atol=1e-6)
    np.testing.assert_array_equal(tensor(gm, f"gm.Image('{path}'):flip():toTensor('byte')"), pixels[::-1])
    np.testing.assert_array_equal(tensor(gm, f"gm.Image('{path}'):flop():toTensor('byte')"), pixels[:, ::-1])
    np.testing.assert_array_equal(tensor(gm, f"gm.Image('{path}'):crop(3, 2, 1, 4):toTensor('byte')"),
                                  pixels[4:6, 1:4])
    corrected = tensor(gm, f"gm.Image('{path}'):gammaCorrection(2.2, 'Red'):toTensor('double')")
    np.testing.assert_allclose(corrected[:, :, 0], src[:, :, 0] ** (1 / 2.2), atol=1e-6)
    np.testing.assert_allclose(corrected[:, :, 1:], src[:, :, 1:], atol=1e-6)


def test_from_tensor_save_blob_and_formats(gm, tmp_path, rng):
    values = rng.random((3, 5, 7)).astype(np.float32)
    gm.execute("function _from(t, path) local im = gm.Image(t, 'RGB', 'DHW') im:save(path) return im end")
    t = luabridge.from_numpy(values)
    image = gm.eval("_from")(t, str(tmp_path / "out.png"))
    with Image.open(tmp_path / "out.png") as png:   # Pillow reads what was written: 8-bit rounding
        np.testing.assert_array_equal(np.asarray(png), np.rint(values.transpose(1, 2, 0) * 255).astype(np.uint8))
    # float pixels are kept as floats between operations, unlike an 8-bit image
    back = luabridge.to_numpy(gm.eval("function(im) return im:toTensor('float', 'RGB', 'DHW') end")(image))
    np.testing.assert_allclose(back, values, atol=1e-7)
    blob = gm.eval("function(im) return (im:clone():format('JPEG'):toBlob(95)) end")(image)
    with Image.open(io.BytesIO(blob.encode("utf-8", "surrogateescape") if isinstance(blob, str) else blob)) as jpg:
        assert jpg.format == "JPEG" and jpg.size == (7, 5)
    assert gm.eval(f"gm.Image():fromBlob(io.open('{tmp_path / 'out.png'}', 'rb'):read('*a')):format()") == "PNG"
    assert gm.eval("function(im) return im:type() end")(image) == "TrueColor"


def test_bad_input_is_a_clear_error(gm, tmp_path):
    (tmp_path / "junk.jpg").write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
    with pytest.raises(luabridge.LuaError, match=r"magick.Image: error loading image .*junk.jpg"):
        gm.execute(f"gm.Image('{tmp_path / 'junk.jpg'}')")
    with pytest.raises(luabridge.LuaError, match="Tensor depth must match color space"):
        gm.execute("gm.Image(torch.FloatTensor(2, 4, 4), 'RGB', 'DHW')")
    with pytest.raises(luabridge.LuaError, match="only dealing with float, double and byte"):
        gm.execute("gm.Image(torch.IntTensor(3, 4, 4), 'RGB', 'DHW')")
    with pytest.raises(luabridge.LuaError, match="the image is empty"):
        gm.execute("gm.Image():toTensor()")
    with pytest.raises(luabridge.LuaError, match="unknown channel 'Q'"):
        gm.execute("gm.Image(torch.FloatTensor(3, 4, 4):zero(), 'RGB', 'DHW'):toTensor('float', 'RQB')")
    with pytest.raises(luabridge.LuaError, match="outside the 4x4 image"):
        gm.execute("gm.Image(torch.FloatTensor(3, 4, 4):zero(), 'RGB', 'DHW'):crop(2, 2, 9, 9)")


def test_max_pixels_refuses_from_the_header(gm, tmp_path):
    Image.new("L", (300, 200)).save(tmp_path / "big.png")
    gm.execute("gm.maxPixels = 50000")
    try:
        with pytest.raises(luabridge.LuaError, match=r"declares 300 x 200 pixels, more than graphicsmagick.maxPixels"):
            gm.execute(f"gm.Image('{tmp_path / 'big.png'}')")
    finally:
        gm.execute("gm.maxPixels = 89478485")


def test_a_script_ending_with_images_alive_or_collected_exits_cleanly(tmp_path):
    # images collected during the run and alive at exit: their Python side is freed without any
    # finalizer calling Python while the process shuts down (that was a segfault at exit)
    out = run_script(
        tmp_path,
        "local gm = require 'graphicsmagick'\n"
        "for i = 1, 50 do gm.Image(torch.FloatTensor(3, 8, 8):uniform(), 'RGB', 'DHW'):size(4, 4) end\n"
        "collectgarbage() collectgarbage()\n"
        "keep = gm.Image(torch.FloatTensor(3, 8, 8):uniform(), 'RGB', 'DHW')\n"
        "print('done')\n")
    assert out.returncode == 0 and "done" in out.stdout, (out.returncode, out.stderr[-2000:])
