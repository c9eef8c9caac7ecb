"""Pages from Jinja2 templates (autoescaped, every output passed through secret redaction), and
the headers every console response carries."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable, Sequence
from importlib import resources
from typing import Any

import jinja2
from aiohttp import web
from markupsafe import Markup

from bot.logs import redact_text
from bot.ports.console import ConsoleSession

# The signed-in operator's session, set by the guard on every request it lets through.
SESSION = web.RequestKey("console_session", ConsoleSession)

CSS = resources.files("bot.console").joinpath("static/console.css").read_text()
SCRIPT = resources.files("bot.console").joinpath("static/live.js").read_text()
# The login page carries the stylesheet inline (no asset is served without a session): the
# policy allows exactly that text by its hash, and no other inline style or script.
_CSS_HASH = base64.b64encode(hashlib.sha256(CSS.encode()).digest()).decode()
POLICY = (
    "default-src 'none'; img-src 'self' data:; connect-src 'self'; script-src 'self'; "
    f"style-src 'self' 'sha256-{_CSS_HASH}'; form-action 'self'; frame-ancestors 'none'; "
    "base-uri 'none'"
)


class Renderer:
    """Renders the package's templates; `secrets` are masked in everything a page shows."""

    def __init__(
        self, base: str, secrets: Iterable[str], nav: Sequence[tuple[str, str]] = ()
    ) -> None:
        self.base = base  # the console's public path, e.g. "/ops/console"
        self._nav = tuple(nav)  # (path under base, label) of each page in the menu
        self._secrets = tuple(secrets)
        self._env = jinja2.Environment(
            loader=jinja2.PackageLoader("bot.console", "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            finalize=self._finalize,
            trim_blocks=True,
            lstrip_blocks=True,
        )

    def _finalize(self, value: Any) -> Any:
        if isinstance(value, str) and not isinstance(value, Markup):
            return redact_text(value, self._secrets)
        return value

    def html(self, template: str, request: web.Request | None, **context: Any) -> str:
        session = request.get(SESSION) if request is not None else None
        return self._env.get_template(template).render(
            base=self.base,
            nav=self._nav,
            css=CSS,
            operator=session.operator if session is not None else None,
            csrf=session.csrf if session is not None else "",
            here=request.match_info.route.name if request is not None else None,
            **context,
        )

    def page(
        self, template: str, request: web.Request | None, *, status: int = 200, **context: Any
    ) -> web.Response:
        return web.Response(
            text=self.html(template, request, **context), status=status, content_type="text/html"
        )


def secure_headers(response: web.StreamResponse) -> None:
    """Every console response: no caching, no framing, no sniffing, the content policy."""
    headers = response.headers
    headers["Cache-Control"] = "no-store"
    headers["Content-Security-Policy"] = POLICY
    headers["X-Frame-Options"] = "DENY"
    headers["X-Content-Type-Options"] = "nosniff"
    headers["Referrer-Policy"] = "same-origin"
