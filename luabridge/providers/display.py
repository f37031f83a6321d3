"""The HTTP side of the Lua `display` package (szym/display's torch client): one POST of a JSON
command to the display server's /events URL. szym/display sends it with luasocket's http.request,
which returns nil and the error (it does not raise) when no server listens; so does this, so a
training script with display on runs the same with no server, as it did under Torch7."""
from __future__ import annotations

import urllib.error
import urllib.request
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..core.runtime import Bridge

TIMEOUT = 5.0   # seconds; luasocket's default is 60, a missing server refuses at once either way


def send(url: Any, body: Any) -> tuple:
    """POSTs body to url: (1, status) on an answer, (None, message) when none came."""
    url = url.decode() if isinstance(url, bytes) else str(url)
    data = body if isinstance(body, bytes) else str(body).encode()
    request = urllib.request.Request(url, data=data, method="POST",
                                     headers={"content-type": "application/text"})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as answer:
            return 1, answer.status
    except urllib.error.HTTPError as e:     # the server answered, with an error status
        return 1, e.code
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", e)
        return None, str(reason)


def callbacks(bridge: "Bridge") -> dict[str, Any]:
    return {"display_send": send}
