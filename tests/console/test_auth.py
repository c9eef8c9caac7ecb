"""Signing in to the console: refused with a clear error then accepted, counted per name and
locked out past the limit, sessions that expire, a stale CSRF token refused, the cookie's flags,
and every route refused without a session."""

from __future__ import annotations

from bot.console.auth import SESSION_COOKIE
from tests.console.rig import PASSWORD, TOKEN, console_rig


async def test_a_wrong_password_is_refused_then_the_right_one_signs_in() -> None:
    async with console_rig() as rig:
        status, page, _ = await rig.client.sign_in(password="not the password")
        assert status == 401
        assert "Wrong name or password" in page
        assert SESSION_COOKIE not in rig.client.cookies
        status, _, headers = await rig.client.sign_in()
        assert status == 303
        assert headers["Location"] == "/console/"
        cookie = headers.getall("Set-Cookie")
        [session] = [c for c in cookie if c.startswith(SESSION_COOKIE + "=")]
        for flag in ("Secure", "HttpOnly", "SameSite=Strict", "Path=/console"):
            assert flag in session
        status, page, _ = await rig.client.get("/")
        assert status == 200
        assert "signed in as <strong>ada</strong>" in page
        audit = await rig.store.console.audited()
        assert [(e.operator, e.action) for e in audit] == [("ada", "sign in")]


async def test_a_token_from_the_environment_signs_in_its_operator() -> None:
    async with console_rig() as rig:
        assert (await rig.client.sign_in("tok", "wrong-token"))[0] == 401
        assert (await rig.client.sign_in("tok", TOKEN))[0] == 303
        assert (await rig.client.get("/"))[0] == 200


async def test_refused_logins_past_the_limit_lock_the_name_even_with_the_right_password() -> None:
    async with console_rig() as rig:
        for _ in range(rig.inputs.settings.login_attempts):
            assert (await rig.client.sign_in(password="guess"))[0] == 401
        status, page, _ = await rig.client.sign_in()
        assert status == 429
        assert "Too many refused sign-ins" in page
        rig.clock.now += rig.inputs.settings.lockout_minutes * 60 + 1
        assert (await rig.client.sign_in(password=PASSWORD))[0] == 303


async def test_an_expired_session_sends_the_page_to_sign_in_saying_so() -> None:
    async with console_rig() as rig:
        await rig.client.sign_in()
        rig.clock.now += rig.inputs.settings.session_hours * 3600 + 1
        status, _, headers = await rig.client.get("/conversations")
        assert status == 303
        assert headers["Location"] == "/console/login?expired=1"
        status, page, _ = await rig.client.get("/login?expired=1")
        assert "Your session expired" in page
        status, _, _ = await rig.client.get("/", headers={"X-Console-Live": "1"})
        assert status == 401


async def test_a_change_without_the_csrf_token_or_with_a_stale_one_is_refused() -> None:
    async with console_rig() as rig:
        await rig.client.sign_in()
        token = await rig.client.csrf()
        for form in ({"key": "k"}, {"key": "k", "csrf": "stale-token"}):
            status, page, _ = await rig.client.post("/conversations/reset", form)
            assert status == 403
            assert "CSRF token is missing or belongs to another session" in page
        assert await rig.store.console.audited(limit=10) != []
        actions = [e.action for e in await rig.store.console.audited()]
        assert "reset conversation" not in actions
        status, _, _ = await rig.client.post("/conversations/reset", {"key": "k", "csrf": token})
        assert status == 303


async def test_signing_out_ends_the_session_on_the_server() -> None:
    async with console_rig() as rig:
        await rig.client.sign_in()
        kept = dict(rig.client.cookies)
        status, _, headers = await rig.client.post("/logout", {"csrf": await rig.client.csrf()})
        assert (status, headers["Location"]) == (303, "/console/login?signed_out=1")
        rig.client.cookies = kept  # the old cookie, replayed
        assert (await rig.client.get("/"))[0] == 303


async def test_every_route_refuses_a_request_without_a_session() -> None:
    async with console_rig() as rig:
        routes = [
            (route.method, route.resource.canonical)
            for route in rig.app.router.routes()
            if route.resource is not None and route.method != "HEAD"
        ]
        assert len(routes) > 8
        for method, canonical in routes:
            path = canonical.replace("{turn_id}", "t1").replace("{approval_id}", "a1")
            path = path.replace("{job}", "j1").replace("{memory_id}", "m1")
            status, body, headers = await rig.client.request(method, path)
            if path in ("/login",):
                assert status in (200, 400), (method, path)
                continue
            if method == "GET":
                assert status == 303, (method, path)
                assert headers["Location"].startswith("/console/login?next="), path
            else:
                assert status == 401, (method, path)
            assert "<table" not in body
        for path in ("/static/", "/nowhere", "/static/../app.py"):
            assert (await rig.client.get(path))[0] == 303, path
