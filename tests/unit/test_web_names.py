"""One naming scheme for the web adapters, and the old names still served
(with a DeprecationWarning) from where they lived: one check per family."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from webtier.web import pagecache, sessions, timing
from webtier.web.pagecache import flask as flask_pagecache
from webtier.web.sessions import django as django_sessions
from webtier.web.sessions import flask as flask_sessions
from webtier.web.sessions import flows
from webtier.web.timing import flask as flask_timing

OLD_NAMES = [
    ("webtier.web.sessions_asgi", "SessionMiddleware", sessions.ASGIMiddleware),
    ("webtier.web.sessions_asgi", "request_session", sessions.request_session),
    ("webtier.web.sessions_wsgi", "WSGISessionMiddleware", sessions.WSGIMiddleware),
    ("webtier.web.sessions_wsgi", "session_of", sessions.session_of),
    ("webtier.web.sessions_wsgi", "sessions_for_flask", flask_sessions.install),
    ("webtier.web.sessions_wsgi", "current_session", flask_sessions.current_session),
    ("webtier.web.sessions_django", "SessionMiddleware", django_sessions.Middleware),
    ("webtier.web.session", "Session", sessions.Session),
    ("webtier.web.session", "AsyncSession", sessions.AsyncSession),
    ("webtier.web.session", "SessionOptions", sessions.SessionOptions),
    ("webtier.web._sessions", "SessionOptions", sessions.SessionOptions),
    ("webtier.web.pagecache_asgi", "PageCacheMiddleware", pagecache.ASGIMiddleware),
    ("webtier.web.pagecache_wsgi", "WSGIPageCache", pagecache.WSGIMiddleware),
    ("webtier.web.pagecache_policy", "store_ttl", pagecache.policy.store_ttl),
    ("webtier.web.timing", "AccessTimeMiddleware", timing.ASGIMiddleware),
    ("webtier.web.timing", "WSGIAccessTime", timing.WSGIMiddleware),
    ("webtier.web.timing", "time_flask", flask_timing.install),
]


@pytest.mark.parametrize(("module", "old", "new"), OLD_NAMES)
def test_an_old_name_warns_and_gives_the_new_one(module: str, old: str, new: object) -> None:
    with pytest.warns(DeprecationWarning, match=rf"{module}\.{old} is deprecated; use "):
        found = getattr(importlib.import_module(module), old)
    assert found is new


def test_a_name_that_never_existed_is_still_an_attribute_error() -> None:
    with pytest.raises(AttributeError):
        importlib.import_module("webtier.web.sessions_asgi").Nothing  # noqa: B018


def test_every_capability_has_the_same_adapter_names() -> None:
    for package in (sessions, pagecache, timing):
        assert {"ASGIMiddleware", "WSGIMiddleware"} <= set(package.__all__)
    for flask_adapter in (flask_sessions, flask_pagecache, flask_timing):
        assert callable(flask_adapter.install)


def test_each_session_method_runs_the_flow_of_its_name() -> None:
    # Session and AsyncSession are compared as twins in test_twins.py.
    public = [name for name in vars(sessions.Session) if not name.startswith("_")]
    assert public
    assert all(callable(getattr(flows, name, None)) for name in public)


def test_wsgi_flask_and_django_adapters_need_no_starlette() -> None:
    # As if webtier[web] were not installed: only the ASGI adapters need it.
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys\n"
            "sys.modules['starlette'] = None\n"
            "from webtier.web import pagecache, sessions, timing\n"
            "from webtier.web.sessions import django\n"
            "assert sessions.WSGIMiddleware and pagecache.WSGIMiddleware\n"
            "assert timing.WSGIMiddleware and sessions.flask.install\n"
            "try:\n"
            "    sessions.ASGIMiddleware\n"
            "except ImportError as error:\n"
            "    print(error)\n",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.startswith("webtier[web] is needed for the ASGI session middleware")
