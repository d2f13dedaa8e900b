"""What the tests share, one module per thing it needs, so that a test
imports only what it uses (``pytest tests/unit`` starts without the web
frameworks installed):

- ``servers``: the Redis servers and targets, every key, faults, processes;
- ``ops``: the op driver (:func:`~tests.helpers.ops.drive`), running an
  operation on a tier, the sync facade made awaitable;
- ``rows``: the row cache's database (SQLAlchemy);
- ``cli``: the ``webtier`` command and the benchmarks' smoke runs (click);
- ``web``: web apps, servers in a thread, cookies, the session shop
  (Starlette, FastAPI, Flask, uvicorn, httpx);
- ``django_shop``: the session shop on Django (configures Django);
- ``shop``: the demo shop served for tests; ``dashboard``: live data for
  the dashboard's tests.

Test modules import from here, never from one another (nor from a
``conftest.py``). Fixtures stay in the ``conftest.py`` files; these modules
hold plain functions and classes.
"""
