"""Who may see the console: sign-in (argon2 passwords or tokens from the environment, refused
logins counted per name), sessions kept server-side in the store behind a `Secure`, `HttpOnly`,
`SameSite=Strict` cookie, and the CSRF token every change must carry.

Every route of the console passes `guard`: only the sign-in page is served without a session. A
page asked for without one redirects to the sign-in page; anything else gets 401."""

from __future__ import annotations

import asyncio
import functools
import hashlib
import hmac
import secrets
from collections.abc import Awaitable, Callable
from urllib.parse import quote

import structlog
from aiohttp import web

from bot.console.inputs import ConsoleInputs
from bot.console.passwords import hash_password, password_matches, token_matches
from bot.console.render import SESSION, Renderer, secure_headers
from bot.console.settings import Operator
from bot.ports.console import AuditEntry, ConsoleSession

SESSION_COOKIE = "bot_console"
LOGIN_COOKIE = "bot_console_login"  # the sign-in form's own CSRF token (double submit)
PUBLIC = frozenset({"login", "login_post"})
LIVE_HEADER = "X-Console-Live"  # the live script's refreshes: answered 401, never redirected
MAX_NAME = 64

log = structlog.get_logger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def digest(token: str) -> str:
    """What the store keys a session by: the cookie's token is never stored."""
    return hashlib.sha256(token.encode()).hexdigest()


@functools.cache
def _dummy_hash() -> str:
    """Checked for a name no operator has, so a refusal takes as long either way."""
    return hash_password(secrets.token_urlsafe(16))


class Gate:
    """Sign-in, sign-out and the guard of every other route."""

    def __init__(self, inputs: ConsoleInputs, renderer: Renderer) -> None:
        self._inputs = inputs
        self._render = renderer
        self._base = renderer.base
        self._cookie_path = renderer.base

    # --- the guard ---

    @web.middleware
    async def guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            response = await self._guarded(request, handler)
        except web.HTTPException as exc:
            secure_headers(exc)
            raise
        except Exception as exc:  # the store cannot be read now, or a bug: a page, not a trace
            log.warning("console_page_failed", path=request.path, error=type(exc).__name__)
            response = self._render.page(
                "error.html",
                request if SESSION in request else None,
                status=503,
                title="Not available",
                message="This page cannot be shown right now (the store did not answer, or "
                "something failed; the host's log says what). Nothing was changed unless the "
                "audit says so. Try again in a moment.",
            )
        secure_headers(response)
        return response

    async def _guarded(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.match_info.route.name in PUBLIC:
            return await handler(request)
        token = request.cookies.get(SESSION_COOKIE, "")
        session = await self._inputs.store.console.session(digest(token)) if token else None
        known = {op.name for op in self._inputs.settings.operators}
        if session is None or session.operator not in known:  # or no longer an operator
            return self._refuse(request, expired=False)
        if session.expires_at <= self._inputs.clock():
            return self._refuse(request, expired=True)
        request[SESSION] = session
        if request.method == "POST" and not await self._csrf_ok(request, session):
            return self._render.page(
                "error.html",
                request,
                status=403,
                title="Stale form",
                message="This form is stale: its CSRF token is missing or belongs to another "
                "session. Nothing was changed. Reload the page and try again.",
            )
        return await handler(request)

    def _refuse(self, request: web.Request, *, expired: bool) -> web.StreamResponse:
        wants_page = request.method == "GET" and LIVE_HEADER not in request.headers
        if not wants_page:
            text = "Your console session expired; sign in again." if expired else "Sign in first."
            response = web.Response(status=401, text=text)
        else:
            query = "?expired=1" if expired else f"?next={quote(request.path_qs, safe='')}"
            response = see_other(f"{self._base}/login{query}")
        if expired:
            response.del_cookie(SESSION_COOKIE, path=self._cookie_path)
        return response

    async def _csrf_ok(self, request: web.Request, session: ConsoleSession) -> bool:
        given = request.headers.get("X-CSRF-Token")
        if given is None:
            form = await request.post()
            value = form.get("csrf")
            given = value if isinstance(value, str) else ""
        return hmac.compare_digest(given.encode(), session.csrf.encode())

    # --- signing in and out ---

    async def login_page(self, request: web.Request) -> web.Response:
        notice = None
        if "expired" in request.query:
            notice = "Your session expired. Sign in again."
        elif "signed_out" in request.query:
            notice = "You are signed out."
        return self._login(request, notice=notice, next_path=request.query.get("next", ""))

    def _login(
        self,
        request: web.Request,
        *,
        status: int = 200,
        error: str | None = None,
        notice: str | None = None,
        name: str = "",
        next_path: str = "",
    ) -> web.Response:
        form_token = secrets.token_urlsafe(24)
        response = self._render.page(
            "login.html",
            None,
            status=status,
            error=error,
            notice=notice,
            name=name,
            form_token=form_token,
            next=_safe_next(next_path, self._base),
        )
        response.set_cookie(
            LOGIN_COOKIE,
            form_token,
            path=self._cookie_path,
            secure=True,
            httponly=True,
            samesite="Strict",
            max_age=3600,
        )
        return response

    async def login(self, request: web.Request) -> web.Response:
        form = await request.post()
        name = _text(form.get("username"))[:MAX_NAME].strip()
        password = _text(form.get("password"))[:1024]
        again = functools.partial(
            self._login, request, name=name, next_path=_text(form.get("next"))
        )
        expected = request.cookies.get(LOGIN_COOKIE, "")
        if not expected or not hmac.compare_digest(_text(form.get("form_token")), expected):
            return self._login(
                request,
                status=400,
                name=name,
                error="The sign-in form was stale (it came from another visit). Try again.",
            )
        settings, now = self._inputs.settings, self._inputs.clock()
        window = settings.lockout_minutes * 60
        book = self._inputs.store.console
        if await book.failures(name, now - window) >= settings.login_attempts:
            return self._login(
                request,
                status=429,
                name=name,
                error=f"Too many refused sign-ins for this name. Wait {settings.lockout_minutes} "
                "minutes, then try again.",
            )
        operator = next((op for op in settings.operators if op.name == name), None)
        if not await asyncio.to_thread(self._matches, operator, password):
            await book.login_failed(name, now)
            return again(status=401, error="Wrong name or password. Try again.")
        assert operator is not None
        return await self._signed_in(request, operator, now)

    def _matches(self, operator: Operator | None, password: str) -> bool:
        if operator is None:
            password_matches(_dummy_hash(), password)
            return False
        if operator.token_env is not None:
            return token_matches(self._inputs.secrets.get(operator.token_env), password)
        assert operator.password_hash is not None
        return password_matches(operator.password_hash, password)

    async def _signed_in(
        self, request: web.Request, operator: Operator, now: float
    ) -> web.Response:
        token = secrets.token_urlsafe(32)
        lasts = self._inputs.settings.session_hours * 3600
        session = ConsoleSession(operator.name, secrets.token_urlsafe(32), now, now + lasts)
        await self._inputs.store.console.open_session(digest(token), session)
        await self._inputs.store.console.audit(AuditEntry(now, operator.name, "sign in", "", "ok"))
        form = await request.post()
        response = see_other(_safe_next(_text(form.get("next")), self._base))
        response.set_cookie(
            SESSION_COOKIE,
            token,
            path=self._cookie_path,
            secure=True,
            httponly=True,
            samesite="Strict",
            max_age=int(lasts),
        )
        response.del_cookie(LOGIN_COOKIE, path=self._cookie_path)
        secure_headers(response)
        return response

    async def logout(self, request: web.Request) -> web.Response:
        session = request[SESSION]
        await self._inputs.store.console.close_session(digest(request.cookies[SESSION_COOKIE]))
        await self._inputs.store.console.audit(
            AuditEntry(self._inputs.clock(), session.operator, "sign out", "", "ok")
        )
        response = see_other(f"{self._base}/login?signed_out=1")
        response.del_cookie(SESSION_COOKIE, path=self._cookie_path)
        secure_headers(response)
        return response


def see_other(location: str) -> web.Response:
    """A 303 redirect, returned (aiohttp wants an HTTPException raised, not returned)."""
    return web.Response(status=303, headers={"Location": location})


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _safe_next(path: str, base: str) -> str:
    """Where to go after signing in: only a path of the console itself (never another site)."""
    if path.startswith(base + "/") and "//" not in path and "\\" not in path:
        return path
    return base + "/"
