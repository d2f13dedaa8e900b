"""Django's own tests of a session backend, and a Django project's login,
logout, messages and parallel requests, on webtier's session engine
(``SESSION_ENGINE = "webtier.web.sessions.django"``).

Run in a process of its own (Django is configured once per process, with
the apps Django's suite needs), by tests/integration/test_sessions_django_engine.py::

    python -m tests.helpers.django_suite REDIS_URL PREFIX DJANGO_TESTS_DIR [browser CHROMIUM]

``DJANGO_TESTS_DIR`` is the ``tests/`` folder of Django's source
distribution, whose ``sessions_tests/tests.py`` holds ``SessionTestsMixin``.
Prints one JSON document: per suite, the tests run, failed (with their
tracebacks) and skipped (with the reason). With ``browser``, only the
admin's login journey in Debian's Chromium (``browser_suite``).
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import sys
import time
import unittest
from typing import Any
from unittest import mock

import django
import httpx
import redis.connection
from django.conf import settings

import webtier
from tests.helpers.web import lost_updates
from webtier.config import RetryPolicy, SessionSettings
from webtier.sessions import users

# -- the project ---------------------------------------------------------------------------

PARALLEL = 200  # requests per client in the lost-update test, two clients at once


def configure(redis_url: str, prefix: str, tests_dir: str) -> webtier.WebTier:
    sys.path.insert(0, tests_dir)
    # Room for the lost-update test's 2 x PARALLEL keys: limits are the deployment's.
    limits = SessionSettings(max_fields=4 * PARALLEL, max_data_bytes=64 * 1024)
    config = dataclasses.replace(webtier.Config(prefix=prefix), sessions=limits)
    tier = webtier.WebTier(webtier.connect(redis_url), config)
    settings.configure(
        DEBUG=False,
        SECRET_KEY="only-for-these-tests",
        ALLOWED_HOSTS=["*"],
        ROOT_URLCONF=__name__,
        INSTALLED_APPS=[
            "django.contrib.admin",
            "django.contrib.contenttypes",
            "django.contrib.auth",
            "django.contrib.sessions",
            "django.contrib.messages",
            "sessions_tests",  # Django's suite: its models module is imported by the tests
        ],
        MIDDLEWARE=[
            "django.contrib.sessions.middleware.SessionMiddleware",
            "django.contrib.auth.middleware.AuthenticationMiddleware",
            "django.contrib.messages.middleware.MessageMiddleware",
        ],
        TEMPLATES=[
            {
                "BACKEND": "django.template.backends.django.DjangoTemplates",
                "APP_DIRS": True,
                "OPTIONS": {
                    "context_processors": [
                        "django.template.context_processors.request",
                        "django.contrib.auth.context_processors.auth",
                        "django.contrib.messages.context_processors.messages",
                    ]
                },
            }
        ],
        MESSAGE_STORAGE="django.contrib.messages.storage.session.SessionStorage",
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
        PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"],
        SESSION_ENGINE="webtier.web.sessions.django",
        WEBTIER_SESSIONS={"tier": tier},
        STATIC_URL="/static/",  # the live server's handlers need them
        MEDIA_URL="/media/",
        USE_TZ=True,
    )
    django.setup()
    return tier


def shards_by_node(tier: webtier.WebTier, user: str) -> tuple[int, int | None]:
    """A session shard on the node that holds ``user``'s index of sessions,
    and one on another node (None on one server, which holds both)."""
    cfg = tier.config
    if tier.transport.one_node:
        return 0, None
    cluster = tier.transport.client
    index = cluster.get_node_from_key(cfg.keys.user_sessions(user, cfg.sessions.shards))
    nodes = [
        cluster.get_node_from_key(cfg.keys.session_shard(shard))
        for shard in range(cfg.sessions.shards)
    ]
    together = next(shard for shard, node in enumerate(nodes) if node == index)
    apart = next(shard for shard, node in enumerate(nodes) if node != index)
    return together, apart


def _views() -> list[Any]:
    from django.contrib import admin, auth, messages
    from django.http import HttpResponse, JsonResponse
    from django.urls import path

    def log_in(request: Any) -> HttpResponse:
        user = auth.authenticate(request, username="ann", password="secret")
        auth.login(request, user)
        messages.info(request, "welcome back")
        return HttpResponse("in")

    def log_out(request: Any) -> HttpResponse:
        auth.logout(request)
        return HttpResponse("out")

    def me(request: Any) -> JsonResponse:
        said = [str(message) for message in messages.get_messages(request)]
        return JsonResponse({"user": request.user.get_username(), "messages": said})

    def nothing(request: Any) -> HttpResponse:
        return HttpResponse("nothing")

    def put(request: Any, name: str) -> HttpResponse:
        request.session[name] = 1
        time.sleep(0.002)  # the view's own work (a query, a template) before the save
        return HttpResponse("put")

    def keys(request: Any) -> JsonResponse:
        return JsonResponse(sorted(request.session.keys()), safe=False)

    return [
        path("admin/", admin.site.urls),
        path("login", log_in),
        path("logout", log_out),
        path("me", me),
        path("put/<str:name>", put),
        path("keys", keys),
        path("nothing", nothing),
    ]


urlpatterns: list[Any] = []
handler500 = "webtier.web.sessions.django.server_error"


# -- the suites ------------------------------------------------------------------------------


def django_suite() -> unittest.TestSuite:
    """Every test of Django's SessionTestsMixin, sync and async, on webtier's engine."""
    from django.test import SimpleTestCase
    from sessions_tests.tests import SessionTestsMixin

    from webtier.web.sessions.django import SessionStore

    class WebtierSessionTests(SessionTestsMixin, SimpleTestCase):  # type: ignore[misc]
        backend = SessionStore

    return unittest.defaultTestLoader.loadTestsFromTestCase(WebtierSessionTests)


def project_suite(tier: webtier.WebTier) -> unittest.TestSuite:
    """A Django project's login, logout and messages, and parallel requests,
    on webtier's engine."""
    from django.contrib.auth.models import User
    from django.test import LiveServerTestCase, override_settings

    from webtier.web.sessions.django import SessionStore

    class WebtierProjectTests(LiveServerTestCase):
        def setUp(self) -> None:
            User.objects.create_user("ann", password="secret")

        def test_login_cycles_the_key_and_logout_ends_the_session(self) -> None:
            with httpx.Client(base_url=self.live_server_url) as http:
                response = http.get("/put/cart")  # an anonymous session
                assert response.status_code == 200, response.text[:3000]
                before = http.cookies["sessionid"]
                http.post("/login")
                after = http.cookies["sessionid"]
                assert before != after
                assert not SessionStore().exists(before)  # the old key is dead
                assert http.get("/me").json() == {"user": "ann", "messages": ["welcome back"]}
                assert "cart" in http.get("/keys").json()  # carried over the login
                stolen = httpx.get(f"{self.live_server_url}/me", cookies={"sessionid": before})
                assert stolen.json()["user"] == ""
                ann = str(User.objects.get(username="ann").pk)
                assert len(tier.sessions.of_user(ann)) == 1  # listed as webtier's own
                http.post("/logout")
                assert not SessionStore().exists(after)
                assert http.get("/me").json()["user"] == ""
                assert tier.sessions.of_user(ann) == []
                http.post("/login")
                assert tier.sessions.revoke_all(ann) == 1  # log out everywhere
                assert http.get("/me").json()["user"] == ""

        def test_a_read_is_one_round_trip_and_a_save_one_more(self) -> None:
            sent: list[Any] = []
            send = redis.connection.AbstractConnection.send_packed_command

            def counted(conn: Any, command: Any, *args: Any, **kwargs: Any) -> Any:
                sent.append(command)
                return send(conn, command, *args, **kwargs)

            def visit(key: str, name: str) -> tuple[str, list[int]]:
                """A visit that reads, changes ``name`` and logs in: its new
                key, and the round trips so far after each step."""
                steps = []
                session = SessionStore(key)
                assert session["a"] == 1
                steps.append(len(sent))
                session[name] = 2
                session.save()
                steps.append(len(sent))  # only ``name`` is sent
                session.cycle_key()  # auth.login's
                session["_auth_user_id"] = "1"
                session.save()
                steps.append(len(sent))
                return str(session.session_key), steps

            def counted_visits(shard: int) -> list[int]:
                first = users.token_in_shard(tier.config, shard)
                assert tier.session_store.create(first, {"a": 1})
                # Scripts loaded on the session's node and its connections
                # made (a new one greets first); the login keeps the shard.
                key, _ = visit(first, "b")
                sent.clear()
                with mock.patch.object(
                    redis.connection.AbstractConnection, "send_packed_command", counted
                ):
                    _, counts = visit(key, "c")
                return counts

            # The login lists the new key in the user's index first: in the
            # rotation's pipeline when the index's slot is on the session's
            # node (always, on one server), one round trip before it when not.
            # A session's shard, not chance, decides it: the test picks both.
            together, apart = shards_by_node(tier, "1")
            counts = counted_visits(together)
            assert counts == [1, 2, 4], counts
            if apart is not None:
                counts = counted_visits(apart)
                assert counts == [1, 2, 5], counts

        def test_while_redis_is_away_a_request_needing_the_session_gets_503(self) -> None:
            with httpx.Client(base_url=self.live_server_url) as http:
                http.get("/put/cart")
                config = webtier.Config(retry=RetryPolicy(attempts=1))
                away = webtier.WebTier(webtier.connect("redis://127.0.0.1:9/0"), config)
                with override_settings(WEBTIER_SESSIONS={"tier": away}):
                    assert http.get("/nothing").status_code == 200
                    read = http.get("/keys")
                    assert read.status_code == 503
                    assert read.headers["retry-after"] == "5"
                    assert http.get("/put/more").status_code == 503
                assert "cart" in http.get("/keys").json()
                webtier.disconnect(away.client)

        def test_parallel_requests_changing_different_keys_keep_every_change(self) -> None:
            LOST["webtier"] = lost_updates(self.live_server_url, "sessionid", PARALLEL)
            assert LOST["webtier"] == 0

    @override_settings(SESSION_ENGINE="django.contrib.sessions.backends.cache")
    class DjangoCacheBackendTests(LiveServerTestCase):
        """The anchor: Django's cache backend saves the whole session."""

        def test_parallel_requests_on_djangos_cache_backend(self) -> None:
            # Counted, not asserted: how many a race loses depends on the machine.
            LOST["django-cache"] = lost_updates(self.live_server_url, "sessionid", PARALLEL)

    load = unittest.defaultTestLoader.loadTestsFromTestCase
    return unittest.TestSuite([load(WebtierProjectTests), load(DjangoCacheBackendTests)])


LOST: dict[str, int] = {}  # engine -> updates lost of 2 x PARALLEL


def browser_suite(chromium: str) -> unittest.TestSuite:
    """The admin's login page in Debian's Chromium: log in, the session
    survives, the old cookie is dead, a password change logs every session
    out (Django's "log out everywhere"), the admin's logout ends the session."""
    from django.contrib.auth.models import User
    from django.test import LiveServerTestCase
    from playwright.sync_api import BrowserContext, Page, sync_playwright

    from webtier.web.sessions.django import SessionStore

    class AdminInChromium(LiveServerTestCase):
        def setUp(self) -> None:
            User.objects.create_superuser("ann", "ann@example.com", "secret")

        def test_the_admins_login_journey(self) -> None:
            base = self.live_server_url

            def sid(context: BrowserContext) -> str:
                (value,) = [c["value"] for c in context.cookies() if c["name"] == "sessionid"]
                return str(value)

            def log_in(page: Page, password: str) -> None:
                page.goto(f"{base}/admin/")
                assert "/admin/login/" in page.url
                page.fill("#id_username", "ann")
                page.fill("#id_password", password)
                page.click("input[type=submit]")
                page.wait_for_url(f"{base}/admin/")
                assert "Site administration" in page.content()

            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=chromium)
                context = browser.new_context()
                page = context.new_page()
                page.goto(f"{base}/put/cart")  # an anonymous session, before the login
                before = sid(context)
                log_in(page, "secret")
                after = sid(context)
                assert after != before
                assert not SessionStore().exists(before)  # cycled: the old cookie is dead
                page.reload()
                assert "Site administration" in page.content()  # the session survives
                stolen = browser.new_context()
                stolen.add_cookies([{"name": "sessionid", "value": before, "url": base}])
                thief = stolen.new_page()
                thief.goto(f"{base}/admin/")
                assert "/admin/login/" in thief.url

                second = browser.new_context().new_page()
                log_in(second, "secret")
                user = User.objects.get(username="ann")
                user.set_password("changed")
                user.save()  # every session's hash is stale now: both are logged out
                for browsing in (page, second):
                    browsing.goto(f"{base}/admin/")
                    assert "/admin/login/" in browsing.url

                log_in(page, "changed")
                current = sid(context)
                page.click("#logout-form button")
                page.wait_for_load_state()
                assert not SessionStore().exists(current)
                page.goto(f"{base}/admin/")
                assert "/admin/login/" in page.url
                browser.close()

    return unittest.defaultTestLoader.loadTestsFromTestCase(AdminInChromium)


def run(suite: unittest.TestSuite) -> dict[str, Any]:
    result = unittest.TextTestRunner(stream=io.StringIO(), verbosity=0).run(suite)
    return {
        "run": result.testsRun,
        "failed": {test.id(): trace for test, trace in result.failures + result.errors},
        "skipped": {test.id(): reason for test, reason in result.skipped},
    }


def main() -> None:
    redis_url, prefix, tests_dir = sys.argv[1:4]
    tier = configure(redis_url, prefix, tests_dir)
    urlpatterns.extend(_views())
    from django.db import connection
    from django.test.utils import setup_test_environment

    setup_test_environment()
    connection.creation.create_test_db(verbosity=0)
    if sys.argv[4:5] == ["browser"]:
        # Playwright's sync API runs an event loop in this thread, where the
        # test changes a password through the ORM (on the live server's shared
        # in-memory database, which another thread would not see).
        os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
        results = {"browser": run(browser_suite(sys.argv[5]))}
    else:
        results = {"django": run(django_suite()), "project": run(project_suite(tier))}
        results["lost"] = LOST
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
