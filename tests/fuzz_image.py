"""Fuzzes the image readers with hostile files: valid PNG, JPEG, PPM and PGM files of every kind
(Pillow's modes, palettes with and without tRNS, 16-bit samples, CMYK and YCCK, progressive,
plain-text PNM), then bit flips, overwritten, inserted, deleted and repeated bytes (a JPEG's
scans repeated), truncations, PNG chunks with their CRCs made right again, and header size edits
up to huge declared sizes.

    python tests/fuzz_image.py --cases 100000 [--seed S] [--chunk N]
    python tests/fuzz_image.py --seed S --case I          (one case, here, with its Lua source)

Each case writes its file and calls one of image.load (random depth and tensor type),
loadPNG / loadJPG / loadPPM, getSize, or decompress / decompressPNG / decompressJPG on its
bytes. A case fails on a crash, a hang, an error that does not name the function and the file
(or that has no reason after them), a result that is no image (wrong shape, floats outside
[0, 1]) or a valid file that is refused or read at the wrong size. A memory blow-up is a crash
or an error under the runner's address-space cap: a bomb must be refused from its header
(image.maxPixels) before anything is allocated. Runs through tests/fuzz_tensor.py's runner
(child processes, chunks, hang timers); a failure replays from (seed, case).
"""
from __future__ import annotations

import io
import random
import struct
import sys
import zlib
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fuzz_tensor  # noqa: E402 - the runner, beside this file

# declared sides a header edit picks: edges, Pillow's and image's limits, each format's maximum
SIDES = (0, 1, 2, 3, 7, 8, 9, 16, 17, 255, 256, 1000, 4096, 9459, 9460, 12000, 30000, 65535, 65536,
         2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1)
MAXVALS = (b"0", b"1", b"15", b"255", b"256", b"1000", b"65535", b"65536", b"-1", b"99999999999999999999", b"x")
FUNCTIONS = ("load", "loadPNG", "loadJPG", "loadPPM", "getSize", "decompress", "decompressPNG", "decompressJPG")
# the functions that read a format, tried most of the time (the others refuse it from its first bytes)
READERS = {"PNG": ("load", "load", "loadPNG", "getSize", "decompress", "decompressPNG"),
           "JPEG": ("load", "load", "loadJPG", "getSize", "decompress", "decompressJPG"),
           "PPM": ("load", "load", "loadPPM", "getSize"), "PGM": ("load", "load", "loadPPM", "getSize")}
EXTENSIONS = {"PNG": ".png", "JPEG": ".jpg", "PPM": ".ppm", "PGM": ".pgm"}


def png_chunk(name: bytes, data: bytes) -> bytes:
    """A PNG chunk: length, name, data, CRC-32 of name and data."""
    return struct.pack(">I", len(data)) + name + data + struct.pack(">I", zlib.crc32(name + data))


def png(width: int, height: int, depth: int, colour: int, rows: bytes, interlace: int = 0) -> bytes:
    """A PNG of one IDAT chunk holding rows (each with its filter byte), compressed."""
    header = struct.pack(">IIBBBBB", width, height, depth, colour, 0, 0, interlace)
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", header) + png_chunk(b"IDAT", zlib.compress(rows))
            + png_chunk(b"IEND", b""))


def png_crcs_fixed(data: bytes) -> bytes:
    """data with every whole chunk's CRC made right (so a mutation gets past Pillow's CRC check)."""
    out, pos = bytearray(data), 8
    while pos + 12 <= len(data):
        length = struct.unpack(">I", data[pos:pos + 4])[0]
        if pos + 12 + length > len(data):
            break
        out[pos + 8 + length:pos + 12 + length] = struct.pack(">I", zlib.crc32(data[pos + 4:pos + 8 + length]))
        pos += 12 + length
    return bytes(out)


def pnm(magic: bytes, width: int, height: int, maxval: bytes, samples: np.ndarray) -> bytes:
    """A PPM/PGM: raw (P5, P6; 16-bit samples big-endian past maxval 255) or plain text (P2, P3)."""
    head = b"%s\n%d %d\n%s\n" % (magic, width, height, maxval)
    if magic in (b"P2", b"P3"):
        return head + b" ".join(b"%d" % v for v in samples.ravel()) + b"\n"
    wide = maxval.isdigit() and int(maxval) > 255
    return head + samples.astype(">u2" if wide else np.uint8).tobytes()


def pillow_file(img, fmt: str, **options) -> bytes:
    buf = io.BytesIO()
    img.save(buf, fmt, **options)
    return buf.getvalue()


def valid_file(rng: random.Random) -> tuple[str, bytes, tuple[int, int, int]]:
    """A valid file of a random kind: its format, its bytes, and the channels (as torch7's image
    gives them), height and width it must load at."""
    from PIL import Image

    w, h = rng.randint(1, 16), rng.randint(1, 16)
    pixels = np.random.default_rng(rng.getrandbits(32)).integers(0, 256, size=(h, w, 4), dtype=np.uint8)
    rgb = Image.fromarray(pixels[..., :3])
    fmt = rng.choice(("PNG", "PNG", "PNG", "JPEG", "JPEG", "PPM", "PGM"))
    kind = rng.randrange(8)
    if fmt == "PNG":
        if kind < 3:    # Pillow's modes; grey with a tRNS chunk now and then
            mode = rng.choice(("1", "L", "LA", "RGB", "RGBA", "I;16"))
            img = Image.fromarray(pixels[..., 0].astype(np.uint16) * 257) if mode == "I;16" else \
                Image.fromarray(pixels).convert(mode)
            options = {"transparency": 5} if mode == "L" and kind == 1 else {}
            return fmt, pillow_file(img, "PNG", **options), ({"LA": 2, "RGB": 3, "RGBA": 4}.get(mode, 1), h, w)
        if kind < 6:    # palettes of 1 to 8 bits, with or without tRNS
            options = {"transparency": rng.randrange(2)} if kind == 4 else {}
            return fmt, pillow_file(rgb.quantize(rng.choice((2, 3, 4, 16, 40, 256))), "PNG", **options), (3, h, w)
        colour = rng.choice((2, 4, 6))   # 16-bit colour and grey with alpha, every row filter type
        channels = {2: 3, 4: 2, 6: 4}[colour]
        body = np.random.default_rng(rng.getrandbits(32)).integers(0, 256, size=(h, 2 * channels * w), dtype=np.uint8)
        rows = b"".join(bytes([rng.randrange(5)]) + row.tobytes() for row in body)
        return fmt, png(w, h, 16, colour, rows), (channels, h, w)
    if fmt == "JPEG":
        options = {"quality": rng.choice((5, 50, 95)), "progressive": kind % 2 == 1}
        if kind < 2:
            return fmt, pillow_file(rgb.convert("L"), "JPEG", **options), (1, h, w)
        if kind < 5:
            data = pillow_file(rgb.convert("CMYK"), "JPEG", **options)
            if kind == 4:    # YCCK: the Adobe marker's transform byte
                at = data.index(b"Adobe") + 11
                data = data[:at] + b"\x02" + data[at + 1:]
            return fmt, data, (3, h, w)
        return fmt, pillow_file(rgb, "JPEG", subsampling=rng.randrange(3), **options), (3, h, w)
    channels = 3 if fmt == "PPM" else 1
    maxval = rng.choice((b"255", b"255", b"15", b"1000", b"65535"))
    samples = np.random.default_rng(rng.getrandbits(32)).integers(0, int(maxval) + 1, size=(h, w, channels))
    magic = {("PPM", 0): b"P6", ("PPM", 1): b"P3", ("PGM", 0): b"P5", ("PGM", 1): b"P2"}[fmt, kind % 2]
    return fmt, pnm(magic, w, h, maxval, samples), (channels, h, w)


def with_declared_size(data: bytes, fmt: str, width: int, height: int, rng: random.Random) -> bytes:
    """data with its header's size set (PNG's IHDR, with its CRC fixed mostly; JPEG's SOF; the
    numbers of a PNM header, maxval edited too now and then)."""
    if fmt == "PNG" and len(data) >= 33:
        data = data[:16] + struct.pack(">II", width % 2 ** 32, height % 2 ** 32) + data[24:]
        return png_crcs_fixed(data) if rng.random() < 0.8 else data
    if fmt == "JPEG":
        sof = max(data.find(b"\xff\xc0"), data.find(b"\xff\xc2"))
        if sof < 0 or len(data) < sof + 9:
            return data
        return data[:sof + 5] + struct.pack(">HH", height % 65536, width % 65536) + data[sof + 9:]
    lines = data.split(b"\n", 3)
    if len(lines) < 4:
        return data
    maxval = rng.choice(MAXVALS) if rng.random() < 0.3 else lines[2]
    return b"\n".join((lines[0], b"%d %d" % (width, height), maxval, lines[3]))


def mutated(data: bytes, fmt: str, rng: random.Random) -> bytes:
    """data after one to three random mutations."""
    for _ in range(rng.randint(1, 3)):
        r, n = rng.random(), len(data)
        if r < 0.25 and n:      # bit flips
            out = bytearray(data)
            for _ in range(rng.randint(1, 8)):
                out[rng.randrange(n)] ^= 1 << rng.randrange(8)
            data = bytes(out)
        elif r < 0.4 and n:     # a run of random bytes
            at = rng.randrange(n)
            data = data[:at] + rng.randbytes(rng.randint(1, 16)) + data[at + rng.randint(0, 16):]
        elif r < 0.55:          # truncation
            data = data[:rng.randrange(n + 1)]
        elif r < 0.8:           # a header size edit: near the real one or huge
            w, h = rng.choice(SIDES), rng.choice(SIDES)
            if rng.random() < 0.4:
                w, h = rng.randint(1, 40), rng.randint(1, 40)
            data = with_declared_size(data, fmt, w, h, rng)
        elif r < 0.88:          # a part repeated: a JPEG's last scan (each one a pass over the image), or bytes
            last = data.rfind(b"\xff\xda")
            at, end = (last, len(data) - 2) if fmt == "JPEG" and last > 0 else sorted(rng.sample(range(n + 2), 2))
            data = data[:at] + data[at:end] * rng.randint(2, 150) + data[end:]
        else:                   # bytes cut out
            at = rng.randrange(n + 1)
            data = data[:at] + data[at + rng.randint(1, 64):]
    if fmt == "PNG" and rng.random() < 0.5:
        data = png_crcs_fixed(data)
    return data


def lua_string(data: bytes) -> str:
    return '"' + "".join(chr(b) if 32 <= b < 127 and b not in (34, 92) else "\\%03d" % b for b in data) + '"'


# check(fn, name, ok, result, failed, channels, height, width): the outcome of one call. failed is
# what a clear error counts as ('refused' for a valid file the call must read); channels, height
# and width, when given, the size a valid file must be read at.
CHECK = r"""
local function check(fn, name, ok, r, failed, channels, height, width)
  if not ok then
    local msg = tostring(r)
    local _, fn_end = msg:find(fn, 1, true)
    local at = fn_end and msg:find(name, fn_end, true)
    if not at or msg:find('Traceback') then return 'unnamed', msg end
    -- a reason: words besides the function, the file and "cannot read"
    local reason = (msg:sub(fn_end + 1, at - 1) .. msg:sub(at + #name)):gsub('cannot %a+', '')
    if not reason:find('%a%a') then return 'unnamed', msg end
    return failed, msg
  end
  if not torch.isTensor(r) then return 'badresult', 'not a tensor: ' .. tostring(r) end
  if fn == 'image.getSize' then
    local size = r:totable()
    if #size ~= 3 or (channels and (size[1] ~= channels or size[2] ~= height or size[3] ~= width)) then
      return 'badresult', 'size ' .. table.concat(size, ' x ')
    end
    return 'ok', ''
  end
  if r:dim() ~= 3 and r:dim() ~= 2 or r:dim() == 3 and r:size(1) > 4 then
    return 'badresult', 'not an image: ' .. table.concat(r:size():totable(), ' x ')
  end
  if channels and r:dim() == 3 and (r:size(2) ~= height or r:size(3) ~= width) then
    return 'badresult', 'read at ' .. table.concat(r:size():totable(), ' x ')
  end
  if torch.typename(r) ~= 'torch.ByteTensor' and r:nElement() > 0 and not (r:min() >= 0 and r:max() <= 1) then
    return 'badresult', 'samples outside [0, 1]'
  end
  return 'ok', ''
end
"""


# the format each reading function insists on (PGM files are PPM to them)
EXPECTED = {"loadPNG": "PNG", "loadJPG": "JPEG", "loadPPM": "PPM", "decompressPNG": "PNG", "decompressJPG": "JPEG"}


def make_case(seed: int, case: int) -> str:
    """The Lua source of one case: write the file, call the function, check what came back."""
    rng = random.Random(seed * 1_000_003 + case)
    fmt, data, size = valid_file(rng)
    fn = rng.choice(READERS[fmt] if rng.random() < 0.85 else FUNCTIONS)
    valid = rng.random() < 0.15
    if not valid:
        data = mutated(data, fmt, rng)
    ext = EXTENSIONS[fmt] if rng.random() < 0.85 else rng.choice((".png", ".jpg", ".ppm", ".pgm", ".bmp", ""))
    depth = rng.choice(("nil", "nil", "1", "3"))
    tensortype = rng.choice(("nil", "'byte'", "'float'", "'double'"))
    # a valid file must be read at its size when the function reads its format (found from its
    # bytes: the extension does not matter); depth 1 makes it H x W, then only its shape is checked
    must_read = valid and EXPECTED.get(fn, fmt) == ("PPM" if fmt == "PGM" else fmt)
    if fn == "getSize" or depth == "nil":
        known = "%d, %d, %d" % size if must_read else "nil"
    else:
        known = "%d, %d, %d" % (3, size[1], size[2]) if must_read and depth == "3" else "nil"
    if fn.startswith("decompress"):
        call = (f"local path = 'the bytes'; local s = torch.ByteStorage():string(data)"
                f"; local ok, r = pcall(image.{fn}, torch.ByteTensor(s), {depth}, {tensortype})")
    else:
        args = "path" if fn == "getSize" else f"path, {depth}, {tensortype}"
        call = (f"local base = os.tmpname(); local path = base .. '{ext}'"
                f"; local f = assert(io.open(path, 'wb')); f:write(data); f:close()"
                f"; local ok, r = pcall(image.{fn}, {args}); os.remove(path); os.remove(base)")
    refused = "'refused'" if must_read else "'error'"
    return CHECK + f"local data = {lua_string(data)}\n{call}\nreturn check('image.{fn}', path, ok, r, {refused}, {known})"


if __name__ == "__main__":
    sys.exit(fuzz_tensor.main(make_case, "torch,image", __doc__))
