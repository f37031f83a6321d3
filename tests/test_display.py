"""require 'display' (szym/display's torch client): the JSON commands its browser server receives,
checked by a local HTTP server here (the image decoded back with PIL, the plot's rows, the text), and
calls that go on without error when no server listens, as luasocket's http.request failures did."""
from __future__ import annotations

import base64
import io
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import numpy as np
import pytest

import luabridge


class _Events(BaseHTTPRequestHandler):
    received: list = []

    def do_POST(self):  # noqa: N802
        body = self.rfile.read(int(self.headers["content-length"]))
        _Events.received.append((self.path, self.headers["content-type"], json.loads(body)))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    _Events.received = []
    httpd = HTTPServer(("127.0.0.1", 0), _Events)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd.server_address[1]
    httpd.shutdown()
    httpd.server_close()


def run(code: str):
    luabridge.require("display")
    return luabridge.eval("function() " + code + " end")()


def test_image_plot_text_reach_the_server(server):
    run(f"display.configure({{hostname = '127.0.0.1', port = {server}}})")
    win = run("local img = torch.linspace(2, 5, 8 * 12):view(1, 8, 12):expand(3, 8, 12); "
              "return display.image(img, {win = 'w1', title = 'ramp'})")
    assert win == "w1"
    path, ctype, cmd = _Events.received[-1]
    assert path == "/events" and ctype == "application/text"
    assert cmd["command"] == "image" and cmd["id"] == "w1" and cmd["title"] == "ramp"
    prefix = "data:image/jpg;base64,"
    assert cmd["src"].startswith(prefix)
    from PIL import Image
    im = Image.open(io.BytesIO(base64.b64decode(cmd["src"][len(prefix):])))
    assert im.format == "JPEG" and im.size == (12, 8)
    # normalised from 2..5 to 0..1 as the client does: the ramp's ends are black and white
    px = np.asarray(im.convert("L"), dtype=float)
    assert px[0, 0] < 20 and px[-1, -1] > 235

    # a batch becomes one grid, ceil(sqrt(n)) to a row
    run("display.image(torch.rand(5, 3, 4, 6), {win = 'grid'})")
    _, _, cmd = _Events.received[-1]
    im = Image.open(io.BytesIO(base64.b64decode(cmd["src"][len(prefix):])))
    assert cmd["id"] == "grid" and im.size == (3 * 6, 2 * 4)

    run("display.plot({{1, 0.5}, {2, 0.25}}, {win = 'p', labels = {'epoch', 'loss'}, title = 'loss'})")
    _, _, cmd = _Events.received[-1]
    assert cmd["command"] == "plot" and cmd["id"] == "p" and cmd["title"] == "loss"
    assert cmd["options"]["file"] == [[1, 0.5], [2, 0.25]] and cmd["options"]["xlabel"] == "epoch"
    assert "win" not in cmd["options"]

    run("display.text('hello', {win = 't'})")
    assert _Events.received[-1][2] == {"command": "text", "id": "t", "text": "hello"}


def test_base64_matches_python():
    for s in (b"", b"a", b"ab", b"abc", bytes(range(256))):
        got = luabridge.eval("function(s) require 'display'; return display._b64(s) end")(s)
        got = got.decode() if isinstance(got, bytes) else got
        assert got == base64.b64encode(s).decode()


def test_no_server_is_silent():
    with socket.socket() as s:     # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    run(f"display.configure({{port = {port}}})")
    win = run("return display.image(torch.rand(3, 4, 4))")
    assert isinstance(win, (str, bytes)) and (win.decode() if isinstance(win, bytes) else win).startswith("pane_")
    run("display.plot(torch.Tensor({{1, 2}, {2, 3}}), {labels = {'x', 'y'}})")


def test_bad_argument_names_display_image():
    with pytest.raises(luabridge.LuaError, match="display.image: expected a tensor"):
        luabridge.execute("require 'display'; display.image(42)")
