"""Images for the Lua `graphicsmagick` package (clementfarabet/graphicsmagick's Image API) on Pillow.

Each image lives here as float32 pixels, height x width x channels in [0, 1] (RGB, or RGBA with
a matte), as GraphicsMagick holds more than 8 bits per sample; Pillow decodes and encodes files
and resamples one channel at a time in its 32-bit float mode, so nothing rounds to bytes between
operations. The Lua side holds a number per image and frees it when collected."""
from __future__ import annotations

import io
import itertools
from typing import TYPE_CHECKING, Any

import numpy as np

from .image.codecs import check_scans

if TYPE_CHECKING:
    from ..core.runtime import Bridge

# GraphicsMagick's resize filters -> Pillow's nearest resampling filter
FILTERS = {"Undefined": "LANCZOS", "Point": "NEAREST", "Box": "BOX", "Triangle": "BILINEAR", "Hermite": "HAMMING",
           "Hanning": "HAMMING", "Hamming": "HAMMING", "Blackman": "LANCZOS", "Gaussian": "BICUBIC",
           "Quadratic": "BICUBIC", "Cubic": "BICUBIC", "Catrom": "BICUBIC", "Mitchell": "BICUBIC",
           "Lanczos": "LANCZOS", "Bessel": "LANCZOS", "Sinc": "LANCZOS"}
# what each tensor type holds per sample: toTensor's data types
SAMPLE = {"byte": np.uint8, "float": np.float32, "double": np.float64}
# the formats save and toBlob write, by file extension
EXTENSIONS = {"jpg": "JPEG", "jpeg": "JPEG", "png": "PNG", "bmp": "BMP", "gif": "GIF", "ppm": "PPM", "pgm": "PPM",
              "tif": "TIFF", "tiff": "TIFF", "webp": "WEBP"}


class Picture:
    """One image: pixels (H x W x 3 or 4, float32 in [0, 1]) and what a file said of it."""

    def __init__(self, pixels: np.ndarray, fmt: str = "XC", depth: int = 8, grey: bool = False,
                 gamma: float = 0.0, profiles: dict[str, bytes] | None = None) -> None:
        self.pixels, self.format, self.depth, self.grey = pixels, fmt, depth, grey
        self.gamma = gamma                      # the file's declared gamma (PNG gAMA), 0 when none
        self.profiles = dict(profiles or {})    # embedded profiles by name ('ICM': the ICC profile)
        self.sampling: list[float] = []         # JPEG chroma sampling factors, as samplingFactors sets them

    @property
    def matte(self) -> bool:
        return self.pixels.shape[2] == 4


def decode(data: bytes, limit: float, where: str) -> Picture:
    from PIL import Image

    with Image.open(io.BytesIO(data)) as img:
        if img.width * img.height > limit:
            raise ValueError(f"{where}: its header declares {img.width} x {img.height} pixels, more than "
                             f"graphicsmagick.maxPixels ({limit:.0f}); raise it to read larger images")
        if img.format == "JPEG":
            check_scans(data)
        img.load()
        fmt, grey = img.format or "XC", img.mode in ("1", "L", "LA", "I", "I;16", "I;16B", "F")
        depth = 16 if img.mode in ("I", "I;16", "I;16B") else 8
        if img.mode in ("I", "I;16", "I;16B"):
            grey_values = np.asarray(img, dtype=np.float32) / 65535.0
            pixels = np.repeat(grey_values[:, :, None], 3, axis=2)
        else:
            matte = "A" in img.getbands() or img.info.get("transparency") is not None
            rgb = img.convert("RGBA" if matte else "RGB")
            pixels = np.asarray(rgb, dtype=np.float32) / 255.0
        gamma = float(img.info.get("gamma", 0.0))
        profiles = {"ICM": img.info["icc_profile"]} if img.info.get("icc_profile") else {}
        # a JPEG's IPTC block: the Photoshop APP13 segment that holds it
        iptc = [data for marker, data in getattr(img, "applist", []) if marker == "APP13"]
        if iptc:
            profiles["IPTC"] = iptc[0]
    return Picture(np.ascontiguousarray(pixels), fmt, depth, grey, gamma, profiles)


def encode(p: Picture, fmt: str, quality: int | None) -> bytes:
    from PIL import Image

    fmt = {"JPG": "JPEG"}.get(fmt.upper(), fmt.upper())
    if fmt in ("XC", ""):
        raise ValueError("cannot compress/export an image with no format: call image:format(fmt) first (JPEG, PNG, ...)")
    values = np.clip(np.rint(p.pixels * 255.0), 0, 255).astype(np.uint8)
    matte = p.matte and fmt not in ("JPEG", "PPM", "BMP")
    if p.grey:
        img = Image.fromarray(values[:, :, 0], "L")
    else:
        img = Image.fromarray(values if matte else np.ascontiguousarray(values[:, :, :3]), "RGBA" if matte else "RGB")
    out = io.BytesIO()
    options: dict[str, Any] = {"quality": int(quality)} if quality is not None and fmt in ("JPEG", "WEBP") else {}
    if fmt == "JPEG" and p.sampling:
        options["subsampling"] = "4:2:0" if p.sampling[0] >= 2 else "4:4:4"
    if "ICM" in p.profiles and fmt in ("JPEG", "PNG", "WEBP", "TIFF"):
        options["icc_profile"] = p.profiles["ICM"]
    if p.gamma and fmt == "PNG":
        from PIL import PngImagePlugin
        info = PngImagePlugin.PngInfo()
        info.add(b"gAMA", int(round(p.gamma * 100000)).to_bytes(4, "big"))
        options["pnginfo"] = info
    img.save(out, format=fmt, **options)
    return out.getvalue()


def resample(pixels: np.ndarray, width: int, height: int, name: str, blur: float) -> np.ndarray:
    from PIL import Image

    method = getattr(Image.Resampling, FILTERS.get(name, "LANCZOS"))
    channels = []
    for c in range(pixels.shape[2]):
        plane = Image.fromarray(np.ascontiguousarray(pixels[:, :, c]), "F")
        channels.append(np.asarray(plane.resize((width, height), method), dtype=np.float32))
    out = np.clip(np.stack(channels, axis=2), 0.0, 1.0)
    # blur > 1 widens the filter (GraphicsMagick's support scale): approximated by a Gaussian after
    return gaussian(out, blur - 1.0) if blur > 1.0 else out


def gaussian(pixels: np.ndarray, sigma: float) -> np.ndarray:
    """A separable Gaussian blur of every channel, edges repeated (Pillow's blur takes no floats)."""
    if sigma <= 0:
        return pixels.copy()
    radius = max(1, int(np.ceil(3.0 * sigma)))
    taps = np.exp(-0.5 * (np.arange(-radius, radius + 1) / sigma) ** 2)
    taps = (taps / taps.sum()).astype(np.float32)
    out = pixels
    for axis in (0, 1):
        padded = np.pad(out, [(radius, radius) if a == axis else (0, 0) for a in range(3)], mode="edge")
        length = out.shape[axis]
        out = sum(t * np.take(padded, np.arange(i, i + length), axis=axis) for i, t in enumerate(taps))
    return out.astype(np.float32)


def convert_profile(p: Picture, source: bytes, target: bytes) -> None:
    """The colours from one ICC profile to another (littlecms through Pillow, at 8 bits a sample),
    as GraphicsMagick converts when a profile replaces another."""
    from PIL import Image, ImageCms

    rgb = Image.fromarray(np.clip(np.rint(p.pixels[:, :, :3] * 255.0), 0, 255).astype(np.uint8), "RGB")
    converted = ImageCms.profileToProfile(rgb, ImageCms.ImageCmsProfile(io.BytesIO(source)),
                                          ImageCms.ImageCmsProfile(io.BytesIO(target)), outputMode="RGB")
    p.pixels = p.pixels.copy()
    p.pixels[:, :, :3] = np.asarray(converted, dtype=np.float32) / 255.0


def luminance(rgb: np.ndarray) -> np.ndarray:
    """Rec. 601 luma, GraphicsMagick's intensity."""
    return rgb[:, :, 0] * 0.299 + rgb[:, :, 1] * 0.587 + rgb[:, :, 2] * 0.114


def channels_of(p: Picture, colorspace: str) -> np.ndarray:
    """H x W x len(colorspace) samples for any string of R, G, B, A, I, C, M, Y, K."""
    rgb, out = p.pixels[:, :, :3], []
    black = 1.0 - rgb.max(axis=2)
    for letter in colorspace:
        if letter in "RGB":
            out.append(rgb[:, :, "RGB".index(letter)])
        elif letter == "A":
            out.append(p.pixels[:, :, 3] if p.matte else np.ones(rgb.shape[:2], np.float32))
        elif letter == "I":
            out.append(luminance(rgb))
        elif letter in "CMY":
            out.append(1.0 - rgb[:, :, "CMY".index(letter)])
        elif letter == "K":
            out.append(black)
        else:
            raise ValueError(f"unknown channel '{letter}' in colorspace '{colorspace}' (any of R, G, B, A, I, C, M, Y, K)")
    return np.stack(out, axis=2)


def callbacks(bridge: "Bridge") -> dict[str, Any]:
    buffers = bridge.buffers
    pictures: dict[int, Picture] = {}
    numbers = itertools.count(1)

    def keep(p: Picture) -> int:
        number = next(numbers)
        pictures[number] = p
        return number

    def failing(f: Any) -> Any:
        """Runs f; a ValueError or OSError comes back as (nil, its message) for the Lua side to raise."""
        def run(*args: Any) -> Any:
            try:
                return f(*args)
            except (ValueError, OSError, KeyError, ImportError) as e:
                return None, str(e) or type(e).__name__
        return run

    def source_bytes(source: Any) -> bytes:
        return open(source, "rb").read() if isinstance(source, str) else buffers.tensor_view(source).tobytes()

    def gm_read(source: Any, limit: float) -> int:
        where = source if isinstance(source, str) else "<blob>"
        return keep(decode(source_bytes(source), limit, where))

    def gm_from_tensor(tensor: Any, colorspace: str, dims: str) -> int:
        values = np.asarray(buffers.tensor_view(tensor), dtype=np.float32)
        if dims == "DHW":
            values = values.transpose(1, 2, 0)
        if values.shape[2] != len(colorspace):
            raise ValueError(f"fromTensor: the tensor has {values.shape[2]} channels and colorspace '{colorspace}' {len(colorspace)}")
        if tensor._dt.name == "Byte":
            values = values / 255.0
        height, width = values.shape[:2]
        named = {letter: values[:, :, i] for i, letter in enumerate(colorspace)}
        grey = set(colorspace) <= {"I", "A"}
        if grey:
            base = named.get("I", np.zeros((height, width), np.float32))
            rgb = [base, base, base]
        else:
            rgb = [named.get(c, np.zeros((height, width), np.float32)) for c in "RGB"]
        planes = rgb + ([named["A"]] if "A" in named else [])
        return keep(Picture(np.clip(np.stack(planes, axis=2), 0, 1).astype(np.float32), "XC", 8, grey))

    def gm_to_tensor(number: int, colorspace: str, dims: str, dst: Any) -> None:
        samples = channels_of(pictures[number], colorspace)
        if dims == "DHW":
            samples = samples.transpose(2, 0, 1)
        out = buffers.tensor_view(dst)
        if dst._dt.name == "Byte":
            out[...] = np.clip(np.rint(samples * 255.0), 0, 255)
        else:
            out[...] = samples
        return True

    def gm_size(number: int) -> tuple[int, int]:
        h, w = pictures[number].pixels.shape[:2]
        return w, h

    def gm_resize(number: int, width: float, height: float, name: str, blur: float) -> bool:
        p = pictures[number]
        w, h = max(1, int(round(width))), max(1, int(round(height)))
        p.pixels = resample(p.pixels, w, h, name, blur)
        return True

    def gm_edit(number: int, what: str, *args: Any) -> bool:
        p = pictures[number]
        x = p.pixels
        if what == "flip":
            x = x[::-1]
        elif what == "flop":
            x = x[:, ::-1]
        elif what == "crop":
            w, h, left, top = (int(a) for a in args)
            x = x[top:top + h, left:left + w]
            if x.size == 0:
                raise ValueError(f"crop {w}x{h}+{left}+{top} lies outside the {p.pixels.shape[1]}x{p.pixels.shape[0]} image")
        elif what == "border":
            w, h, r, g, b = args
            fill = np.array([r, g, b, 1.0][:x.shape[2]], np.float32)
            out = np.empty((x.shape[0] + 2 * int(h), x.shape[1] + 2 * int(w), x.shape[2]), np.float32)
            out[...] = fill
            out[int(h):int(h) + x.shape[0], int(w):int(w) + x.shape[1]] = x
            x = out
        elif what == "negate":
            x = x.copy()
            x[:, :, :3] = 1.0 - x[:, :, :3]
        elif what == "gamma":
            channels = {"Red": [0], "Green": [1], "Blue": [2], "All": [0, 1, 2]}.get(args[1] or "All")
            if channels is None:
                raise ValueError(f"unknown channel {args[1]} (Red, Green, Blue or All)")
            x = x.copy()
            x[:, :, channels] = np.power(np.clip(x[:, :, channels], 0, 1), 1.0 / float(args[0]))
        elif what == "blur":
            x = np.clip(gaussian(x, float(args[1])), 0, 1)
        elif what == "unsharp":
            sigma, amount, threshold = (float(a) for a in args)
            detail = x - gaussian(x, sigma)
            x = np.clip(np.where(np.abs(detail) >= threshold, x + amount * detail, x), 0, 1)
        elif what == "rotate":
            from PIL import Image
            deg, r, g, b = (float(a) for a in args)
            fills = [r, g, b, 1.0]
            x = np.stack([np.asarray(Image.fromarray(np.ascontiguousarray(x[:, :, c]), "F")
                                     .rotate(-deg, resample=Image.Resampling.BILINEAR, expand=True, fillcolor=fills[c]),
                                     dtype=np.float32) for c in range(x.shape[2])], axis=2)
        elif what == "grey":
            x = np.repeat(luminance(x)[:, :, None], 3, axis=2) if x.shape[2] == 3 else \
                np.concatenate([np.repeat(luminance(x)[:, :, None], 3, axis=2), x[:, :, 3:]], axis=2)
            p.grey = True
        elif what == "matte":
            if not p.matte:
                x = np.concatenate([x, np.ones(x.shape[:2] + (1,), np.float32)], axis=2)
        else:
            raise ValueError(f"unknown operation {what}")
        p.pixels = np.ascontiguousarray(x, dtype=np.float32)
        return True

    def gm_property(number: int, name: str, value: Any = None) -> Any:
        p = pictures[number]
        if value is None:
            if name == "sampling":
                return bridge.lua.table_from(p.sampling) if p.sampling else None
            return {"format": p.format, "depth": p.depth, "grey": p.grey, "matte": p.matte, "gamma": p.gamma}[name]
        if name == "sampling":
            p.sampling = [float(value[i]) for i in range(1, len(value) + 1)]
        elif name == "gamma":
            p.gamma = float(value)
        elif name == "format":
            p.format = {"JPG": "JPEG"}.get(str(value).upper(), str(value).upper())
        elif name == "depth":
            p.depth = int(value)
        return True

    def gm_encode(number: int, fmt: str, quality: Any) -> Any:
        p = pictures[number]
        return encode(p, fmt or p.format, quality)

    def gm_write(number: int, path: str, quality: Any) -> bool:
        p = pictures[number]
        ext = path.rsplit(".", 1)[-1].lower() if "." in path else ""
        data = encode(p, EXTENSIONS.get(ext, p.format), quality)
        with open(path, "wb") as f:
            f.write(data)
        return True

    def gm_profile(number: int, name: str, action: str, data: Any = None) -> Any:
        """get: the profile's bytes or nil; set: store them; remove: one profile, or all for '*'."""
        profiles = pictures[number].profiles
        key = {"icc": "ICM", "icm": "ICM"}.get(name.lower(), name.upper())
        if action == "get":
            return profiles.get(key)
        if action == "set":
            new = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else bytes(data)
            if key == "ICM" and profiles.get("ICM") and profiles["ICM"] != new:
                convert_profile(pictures[number], profiles["ICM"], new)
            profiles[key] = new
        elif name == "*":
            profiles.clear()
        else:
            profiles.pop(key, None)
        return True

    def gm_clone(number: int) -> int:
        p = pictures[number]
        return keep(Picture(p.pixels.copy(), p.format, p.depth, p.grey, p.gamma, p.profiles))

    def gm_free(numbers: str) -> None:
        for number in numbers.split(","):
            pictures.pop(int(number), None)

    def gm_missing() -> str | None:
        from .image.codecs import missing
        return "graphicsmagick: Pillow is not installed; install the extra: pip install 'luabridge[image]'" \
            if missing() else None

    return {"gm_missing": gm_missing, "gm_read": failing(gm_read), "gm_from_tensor": failing(gm_from_tensor),
            "gm_to_tensor": failing(gm_to_tensor), "gm_size": gm_size, "gm_resize": failing(gm_resize),
            "gm_edit": failing(gm_edit), "gm_property": gm_property, "gm_encode": failing(gm_encode),
            "gm_write": failing(gm_write), "gm_clone": gm_clone, "gm_profile": failing(gm_profile), "gm_free": gm_free}
