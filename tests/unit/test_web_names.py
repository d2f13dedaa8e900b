"""One naming scheme for the web adapters: the same names in every
capability's package, each session method a flow of its name."""

from __future__ import annotations

import subprocess
import sys

from webtier.web import pagecache, sessions, timing
from webtier.web.pagecache import flask as flask_pagecache
from webtier.web.sessions import flask as flask_sessions
from webtier.web.sessions import flows
from webtier.web.timing import flask as flask_timing


def test_every_capability_has_the_same_adapter_names() -> None:
    for package in (sessions, pagecache, timing):
        assert {"ASGIMiddleware", "WSGIMiddleware"} <= set(package.__all__)
    for flask_adapter in (flask_sessions, flask_pagecache, flask_timing):
        assert callable(flask_adapter.install)


def test_each_session_method_runs_the_flow_of_its_name() -> None:
    # Session and AsyncSession are compared as twins in test_twins.py.
    # (Its one property, ``state``, is the request's view the page cache reads.)
    public = [
        name
        for name, value in vars(sessions.Session).items()
        if not name.startswith("_") and not isinstance(value, property)
    ]
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
