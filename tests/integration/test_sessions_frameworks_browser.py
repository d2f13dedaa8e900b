"""The frameworks' own sessions on webtier in a real browser: Debian's
Chromium, headless, driven by Playwright (no browser download). A Flask app
with flask-login over ``SessionInterface``, and a Django project (settings,
``django.contrib.auth``, the admin's login page) over
``SESSION_ENGINE = "webtier.web.sessions.django"``: log in, the session
survives, the old cookie is dead, log out everywhere (``revoke_all``: the
user's sessions are webtier's), log out. Skips only when Chromium is not
installed (and fails then in CI)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import flask
import flask_login
import pytest

import webtier
from tests.helpers.web import serving
from webtier.web.sessions.flask import SessionInterface

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not os.access(CHROMIUM, os.X_OK), reason="Debian's chromium is not installed"
    ),
]


class User(flask_login.UserMixin):
    def __init__(self, name: str) -> None:
        self.id = name


def flask_login_app(tier: webtier.WebTier) -> flask.Flask:
    app = flask.Flask(__name__)
    app.secret_key = "only-for-these-tests"
    app.session_interface = SessionInterface(tier)
    logins = flask_login.LoginManager(app)
    logins.user_loader(User)
    logins.login_view = "login"

    @app.route("/login", methods=["GET", "POST"])
    def login() -> Any:
        if flask.request.method == "GET":
            return "<form method=post><input name=user><button id=go>in</button></form>"
        app.session_interface.regenerate(flask.session)  # type: ignore[attr-defined]
        flask_login.login_user(User(flask.request.form["user"]))
        return flask.redirect("/me")

    @app.get("/me")
    @flask_login.login_required
    def me() -> str:
        return f"user: {flask_login.current_user.id}"

    @app.get("/cart")
    def cart() -> str:
        flask.session["cart"] = ["book"]
        return "cart"

    @app.post("/logout")
    def logout() -> Any:
        flask_login.logout_user()
        return "bye"

    return app


def test_a_flask_login_journey_in_chromium(sync_client: Any, config: webtier.Config) -> None:
    from playwright.sync_api import sync_playwright

    tier = webtier.WebTier(sync_client, config)
    with serving(flask_login_app(tier)) as base, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM)
        context = browser.new_context()
        page = context.new_page()

        def session_cookie() -> str:
            (value,) = [c["value"] for c in context.cookies() if c["name"] == "session"]
            return str(value)

        page.goto(f"{base}/cart")  # an anonymous session, before the login
        before = session_cookie()
        page.goto(f"{base}/me")  # flask-login sends the visitor to its login page
        assert page.url.startswith(f"{base}/login")
        page.fill("input[name=user]", "ann")
        page.click("#go")
        page.wait_for_url(f"{base}/me")
        assert page.text_content("body") == "user: ann"
        after = session_cookie()
        assert after != before
        assert tier.session_store.read(before) is None  # the old cookie is dead
        assert tier.session_store.read(after).data["cart"] == ["book"]  # type: ignore[union-attr]
        page.reload()
        assert page.text_content("body") == "user: ann"  # the session survives

        stolen = browser.new_context()
        stolen.add_cookies([{"name": "session", "value": before, "url": base}])
        thief = stolen.new_page()
        thief.goto(f"{base}/me")
        assert thief.url.startswith(f"{base}/login")

        # Log out everywhere: the user's sessions of every framework are webtier's.
        second = browser.new_context().new_page()
        second.goto(f"{base}/login")
        second.fill("input[name=user]", "ann")
        second.click("#go")
        second.wait_for_url(f"{base}/me")
        assert len(tier.sessions.of_user("ann")) == 2
        assert tier.sessions.revoke_all("ann") == 2
        for browsing in (page, second):
            browsing.goto(f"{base}/me")
            assert browsing.url.startswith(f"{base}/login")

        page.fill("input[name=user]", "ann")
        page.click("#go")
        page.wait_for_url(f"{base}/me")
        page.evaluate("fetch('/logout', {method: 'POST'})")
        page.goto(f"{base}/me")
        assert page.url.startswith(f"{base}/login")
        assert tier.sessions.of_user("ann") == []
        browser.close()


def test_a_django_admin_login_journey_in_chromium(redis_url: str, prefix: str) -> None:
    """Runs in the Django project of tests/helpers/django_suite.py (a process
    of its own): see its ``browser_suite``."""
    from tests.integration.test_sessions_django_engine import django_tests_dir

    command = [sys.executable, "-m", "tests.helpers.django_suite", redis_url, prefix]
    command += [str(django_tests_dir()), "browser", CHROMIUM]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)["browser"]
    assert results["failed"] == {}, "\n".join(results["failed"].values())
    assert results["skipped"] == {}
    assert results["run"] == 1
