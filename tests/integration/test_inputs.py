"""Every input: a WebtierError or success, nothing else (issue #12).

Hypothesis drives every public method of the sync and asyncio facades, and
every function of :mod:`webtier.book`, with names, ids, numbers and lists of
every type: bools, Decimals (NaN, sNaN, infinities, huge exponents),
Fractions, huge ints (past Python's 4,300-digit limit too), NaN and infinite
floats, strings with ``:``, ``{``, ``}``, Unicode and control characters,
empty or over 1 KB, a ``str`` where a list is expected, lists with bad
members. Each call must return, or raise a :class:`~webtier.WebtierError`
other than the two that mean a bad input got past the checks
(``ServerError``: Redis refused what was sent; ``RedisUnavailable``: the
exchange broke). Anything else (``TypeError``, ``OverflowError``, a
``ValueError`` that is not ``InvalidInput``, a crash) is an escape.
Callbacks (a page's render, a book view, a row loader) are the caller's
code and are given working ones: their errors are theirs to raise.

The methods are listed by introspection, so a new public method fails
:func:`test_every_public_method_is_fuzzed` until it has a spec here.

Then distinct valid names, differing only by ``{``, ``:``, a space or
Unicode normalisation say, must never share data, in every capability
that keys data by a name.

The bulk runs on the default standalone server; a smaller run on the
Cluster, where keys and slots matter. The two runs take turns over the
sync and asyncio facades (:func:`by_turns`): each method goes through both.
"""

from __future__ import annotations

import inspect
import unicodedata
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from typing import Any

import anyio
import pytest
import redis
import redis.asyncio
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import webtier
from tests.helpers.rows import seed
from webtier import book
from webtier._core.facade import Part
from webtier._core.keys import check_name
from webtier._core.protocol import Call
from webtier.errors import InvalidInput, RedisUnavailable, ServerError, WebtierError
from webtier.pagecache import BOOK_RULES, PageRequest, Plan
from webtier.rows import FunctionSource, Source
from webtier.types import Rendered

pytestmark = pytest.mark.anyio

NOW = 1_700_000_123.25
STANDALONE_EXAMPLES = 80
CLUSTER_EXAMPLES = 15

# -- strategies ------------------------------------------------------------------------------

# Characters that matter to keys: separators, hash tag braces, and Unicode
# whose normalised forms differ (é / e + combining acute, Å / Angstrom sign,
# the fi ligature / "fi"), zero-width ones.
SPECIAL = [":", "{", "}", "/", " ", "*", "?", "%", "\\", '"', "é", "e\u0301", "Å", "\u212b",
           "ﬁ", "fi", "ß", "页", "✓", "\U0001f600", "\u200b", "\ufeff"]  # fmt: skip

GOOD_NAMES: st.SearchStrategy[str] = st.one_of(
    st.text(st.characters(exclude_categories=("Cc", "Cs")), min_size=1, max_size=20),
    st.lists(st.sampled_from([*SPECIAL, "a", "b", "1"]), min_size=1, max_size=8).map("".join),
    st.sampled_from(["x" * 1024, "é" * 512, "\U0001f600" * 256]),  # at the 1 KB limit
)
BAD_TEXTS: st.SearchStrategy[str] = st.one_of(
    st.just(""),
    st.tuples(st.text(max_size=4), st.characters(categories=("Cc", "Cs")), st.text(max_size=4)).map(
        "".join
    ),
    st.sampled_from(["x" * 1025, "é" * 513, "x" * 100_000]),
)
DECIMALS = ("sNaN", "-sNaN", "NaN", "-Infinity", "1e400", "1e999999", "-1e999999", "2.0", "0.5")
NUMBERS: st.SearchStrategy[Any] = st.one_of(
    st.booleans(),
    st.integers(-1000, 10**6),
    st.integers(),
    st.sampled_from([2**31, 2**53, 2**53 + 1, -(2**53) - 1, 2**63, 2**64]),
    # Built when drawn: a strategy holding 10**5000 could not even be printed.
    st.tuples(st.sampled_from([1, -1]), st.sampled_from([400, 1100, 4300, 5000])).map(
        lambda sign_digits: sign_digits[0] * 10 ** sign_digits[1]
    ),
    st.floats(),
    st.sampled_from([float("nan"), float("inf"), float("-inf"), -0.0, 1e308, 5e-324]),
    st.decimals(allow_nan=True, allow_infinity=True),
    st.sampled_from([Decimal(text) for text in DECIMALS]),
    st.fractions(),
    st.sampled_from([(10**400, 3), (1, 10**400), (-(10**400), 7), (6, 3)]).map(
        lambda pair: Fraction(*pair)
    ),
    st.complex_numbers(max_magnitude=10, allow_nan=False, allow_infinity=False),
)
OTHERS: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.binary(max_size=8),
    st.builds(object),
    st.lists(st.integers(0, 3), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.just(uuid.UUID(int=42)),
    st.just(...),
)
JUNK: st.SearchStrategy[Any] = st.one_of(GOOD_NAMES, BAD_TEXTS, NUMBERS, OTHERS)
HASHABLE: st.SearchStrategy[Any] = st.one_of(  # for dict keys
    GOOD_NAMES, BAD_TEXTS, st.integers(), st.floats(allow_nan=False), st.booleans(), st.none()
)


def maybe(good: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``good`` about half the time (so the later arguments get checked
    too), anything the other half."""
    return st.one_of(good, JUNK)


NAMES = maybe(GOOD_NAMES)
SECONDS = maybe(st.sampled_from([NOW, 0, 1, 2**34 - 1, 0.5, Decimal(NOW), Fraction(7, 2)]))
PRECISIONS = maybe(st.sampled_from([1, 5, 60, 300, 3600, 18000, 86400, 60.0, Decimal(60)]))
COUNTS = maybe(st.sampled_from([1, -2, 0, 3.0, Fraction(4, 2), Decimal("5"), 2**53]))
LIMITS = maybe(st.integers(0, 50))
BY = st.text(max_size=8).map("p".__add__)  # percentiles, or not
TYPES = maybe(st.sampled_from(["AccessTime", "BasketSize", "x"]))


JSONISH: st.SearchStrategy[Any] = st.recursive(
    st.one_of(st.none(), st.booleans(), NUMBERS, GOOD_NAMES, BAD_TEXTS),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(HASHABLE, inner, max_size=3),
    max_leaves=6,
)


def name_lists(names: st.SearchStrategy[Any] = GOOD_NAMES) -> st.SearchStrategy[Any]:
    """Lists of names, good or with bad members; and what is not a list."""
    return st.one_of(
        st.lists(names, max_size=4),
        st.lists(maybe(names), min_size=1, max_size=3),
        st.lists(names, max_size=3).map(tuple),
        st.lists(names, max_size=3).map(iter),
        st.frozensets(GOOD_NAMES, max_size=3),
        GOOD_NAMES,  # a str where a list is expected: refused, not split
        JUNK,
    )


# -- what a call may do ---------------------------------------------------------------------


def allowed(error: BaseException) -> bool:
    """Whether ``error`` is an acceptable answer to a bad input."""
    return isinstance(error, WebtierError) and not isinstance(error, ServerError | RedisUnavailable)


async def outcome(call: Callable[[], Any]) -> Any:
    """Run ``call`` (awaiting its result if needed): its value, or None when
    it raised an allowed error. Any other error propagates, so Hypothesis
    reports the escape with its smallest input."""
    try:
        result = call()
        if inspect.isawaitable(result):
            result = await result
    except Exception as error:
        if allowed(error):
            return None
        raise
    return result


FUZZ = settings(deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])


async def hypothesize(
    strategy: st.SearchStrategy[Any], body: Callable[[Any], Awaitable[None]], examples: int
) -> None:
    """Run ``body`` on ``examples`` values of ``strategy`` in this test's
    event loop. Hypothesis draws in a worker thread (its ``@given`` does not
    mix with the loop the fixtures' clients live in)."""

    @settings(FUZZ, max_examples=examples)
    @given(value=strategy)
    def run(value: Any) -> None:
        anyio.from_thread.run(body, value)

    await anyio.to_thread.run_sync(run)


# -- the world a call runs in ---------------------------------------------------------------


@dataclass
class World:
    """Things a call needs that a strategy cannot make: live session tokens
    (strict mode), row sources, page plans."""

    tier: Any
    api: str
    tokens: list[str]
    sources: list[Source]
    plans: list[Plan]


def _row(key: str) -> dict[str, Any]:
    return {"id": key}


@pytest.fixture
async def world(tier: Any, api: str, tmp_path: Any) -> Any:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'shop.db'}")
    sources: list[Source] = [FunctionSource("fz", _row), seed(engine, 5)]
    tokens = [await tier.sessions.new(), await tier.sessions.new(user="ann")]
    rules = BOOK_RULES
    plans = [
        plan
        for url in ("/?item=42", "/p?item=%C3%A9%7B:", "http://h/x?item=a")
        if (plan := rules.plan(tier.config, PageRequest.from_url(url))) is not None
    ]
    yield World(tier, api, tokens, sources, plans)
    engine.dispose()


# -- one spec per public method ----------------------------------------------------------------


@dataclass(frozen=True)
class Spec:
    """How to call one method: a strategy per positional argument, keyword
    arguments each passed or left out, and keyword arguments always passed
    (``fixed``). ``use`` does something with what the call returned (close
    a recorder, time a block...)."""

    args: tuple[st.SearchStrategy[Any], ...] = ()
    kwargs: Mapping[str, st.SearchStrategy[Any]] = field(default_factory=dict)
    use: Callable[[str, Any], Awaitable[None]] | None = None
    fixed: Mapping[str, st.SearchStrategy[Any]] = field(default_factory=dict)

    def calls(self) -> st.SearchStrategy[tuple[tuple[Any, ...], dict[str, Any]]]:
        keywords = st.fixed_dictionaries(dict(self.fixed), optional=dict(self.kwargs))
        return st.tuples(st.tuples(*self.args), keywords)


async def _close(api: str, made: Any) -> None:
    if api != "sync":
        await made.aclose()
    else:
        await anyio.to_thread.run_sync(made.close)


async def _record_and_close(api: str, recorder: Any) -> None:
    """Adds values good and bad (each recorded or refused with InvalidInput,
    before anything is sent), then closes the recorder, which flushes."""
    for context, stat_type, value in [
        ("/", "AccessTime", 0.5),
        ("", "AccessTime", 0.5),
        ("/", "no type", 0.5),
        ("/", "AccessTime", -1),
        ("/", "Delta", float("inf")),
        ("/", "Delta", "1"),
        (b"/", "Delta", 1),
        (["/"], "Delta", 1),
    ]:
        await outcome(lambda c=context, t=stat_type, v=value: recorder.record(c, t, v))
    await _close(api, recorder)


async def _time_a_block(api: str, timer: Any) -> None:
    if api != "sync":
        async with timer:
            pass
    else:
        with timer:
            pass


def _render() -> Rendered:
    return Rendered(200, (("content-type", "text/plain"),), b"page", 60.0)


def _specs(world: World) -> dict[str, Spec]:
    token = maybe(st.sampled_from([*world.tokens, webtier.sessions.new_token()]))
    source = maybe(st.sampled_from(world.sources))
    data = maybe(st.dictionaries(HASHABLE, JSONISH, max_size=3))
    row_ids = maybe(st.one_of(GOOD_NAMES, st.integers(), st.just(10**1100), st.uuids()))
    settings = {"flush_interval": maybe(st.just(3600)), "max_pending": LIMITS}
    return {
        # counters
        "counters.record": Spec((NAMES, COUNTS), {"now": SECONDS}),
        "counters.get": Spec((NAMES, PRECISIONS), {"start": SECONDS, "end": SECONDS}),
        "counters.get_many": Spec((name_lists(), PRECISIONS), {"start": SECONDS, "end": SECONDS}),
        "counters.names": Spec((maybe(st.sampled_from(["", "a", "{"])),)),
        "counters.clean": Spec((LIMITS, SECONDS, maybe(st.integers(1, 1000)))),
        "counters.recorder": Spec((), settings, use=_close),
        # statistics
        "stats.record": Spec((NAMES, TYPES, maybe(st.floats(0, 10))), {"failed": st.booleans()}),
        "stats.get": Spec((NAMES, TYPES, LIMITS)),
        "stats.get_many": Spec((name_lists(), TYPES, LIMITS)),
        "stats.series": Spec((NAMES, TYPES, LIMITS)),
        "stats.series_many": Spec((name_lists(), TYPES, LIMITS)),
        "stats.slowest": Spec(
            (LIMITS, TYPES, LIMITS, maybe(st.sampled_from(["mean", "max", "p95", "pnan"]) | BY))
        ),
        "stats.access_time": Spec((NAMES,), use=_time_a_block),
        "stats.recorder": Spec((), settings, use=_record_and_close),
        # workers
        "workers.alive": Spec(),
        # the deployment's settings
        "deployment.check": Spec(),
        "deployment.stored": Spec(),
        "deployment.adopt": Spec(),
        "deployment.reset": Spec(),
        # ranking
        "ranking.rank": Spec((NAMES,)),
        "ranking.top": Spec((LIMITS,)),
        "ranking.rescale": Spec(),
        "ranking.view_requests": Spec((NAMES,)),
        "ranking.record_view": Spec((NAMES,)),
        "ranking.aggregator": Spec((), settings, use=_close),
        "ranking.top_items": Spec((LIMITS,), {"refresh": maybe(st.just(60))}, use=_close),
        # row cache
        "rows.schedule": Spec((source, row_ids, maybe(st.sampled_from([0, 60, -1, 0.5])))),
        "rows.unschedule": Spec((source, row_ids)),
        "rows.get": Spec((source, row_ids), {"load": st.booleans()}),
        "rows.get_many": Spec((source, name_lists(row_ids)), {"load": st.booleans()}),
        "rows.warm": Spec((source, name_lists(row_ids))),
        "rows.invalidate": Spec((source, row_ids)),
        "rows.refresh_now": Spec((source, row_ids)),
        "rows.refresh_due": Spec((maybe(st.lists(st.sampled_from(world.sources))),)),
        "rows.status": Spec((source,)),
        # page cache
        "pagecache.serve": Spec(
            (maybe(st.sampled_from(world.plans)), maybe(st.just(Call(_render))))
        ),
        "pagecache.invalidate": Spec(
            (maybe(st.sampled_from(["/?item=42", "/x", "http://[", "?item=", "/\ud800"])),),
            {
                "headers": maybe(st.dictionaries(GOOD_NAMES, maybe(GOOD_NAMES), max_size=2)),
                "rules": maybe(st.just(BOOK_RULES)),
            },
        ),
        "pagecache.invalidate_item": Spec((NAMES,)),
        "pagecache.invalidate_all": Spec(),
        # sessions
        "sessions.new": Spec((maybe(GOOD_NAMES),)),
        "sessions.check": Spec((token,)),
        "sessions.info": Spec((token,)),
        "sessions.touch": Spec((token,), {"user": maybe(st.just("ann")), "item": NAMES}),
        "sessions.login": Spec(
            (token, maybe(st.just("ann"))),
            {"cart_policy": maybe(st.sampled_from(["add", "replace", "keep_larger"]))},
        ),
        "sessions.logout": Spec((maybe(st.just(webtier.sessions.new_token())),)),
        "sessions.of_user": Spec((NAMES,)),
        "sessions.revoke": Spec((NAMES, maybe(st.just("x")))),
        "sessions.revoke_all": Spec((maybe(st.just("bob")),)),
        "sessions.data": Spec((token,)),
        "sessions.update": Spec((token, maybe(st.dictionaries(HASHABLE, JSONISH, max_size=3)))),
        "sessions.discard": Spec((token, NAMES, NAMES)),
        "sessions.recently_viewed": Spec((token,)),
        "sessions.clean": Spec((), {"keep": maybe(st.just(10**9)), "max_steps": LIMITS}),
        "sessions.stats": Spec(),
        # carts
        "session_store.read": Spec((token,)),
        "session_store.exists": Spec((token,)),
        "session_store.rotate": Spec(
            (maybe(st.builds(webtier.sessions.new_token)),), {"user": maybe(st.just("ann"))}
        ),
        "session_store.delete": Spec((maybe(st.builds(webtier.sessions.new_token)),)),
        "session_store.create": Spec(
            (maybe(st.builds(webtier.sessions.new_token)), data),
            {"expiry": SECONDS, "blob": maybe(st.binary(max_size=8)), "user": NAMES},
        ),
        "session_store.save": Spec(
            (token, data, maybe(st.lists(GOOD_NAMES, max_size=2))),
            {"expiry": SECONDS, "blob": maybe(st.binary(max_size=8)), "user": NAMES},
        ),
        "carts.set": Spec((token, NAMES, COUNTS)),
        "carts.get": Spec((token,)),
        "carts.clear": Spec((token,)),
    }


def public_methods(tier: Any) -> dict[str, Any]:
    """Every public method of every part of a tier, by "part.method"."""
    found = {}
    for part_name, part in vars(tier).items():
        if isinstance(part, Part):
            for name in dir(part):
                if not name.startswith("_") and callable(getattr(part, name)):
                    found[f"{part_name}.{name}"] = getattr(part, name)
    return found


# Clients that never connect: the tiers are only looked at.
METHODS = sorted(public_methods(webtier.WebTier(redis.Redis(port=1))))
ASYNC_METHODS = sorted(public_methods(webtier.AsyncWebTier(redis.asyncio.Redis(port=1))))


def test_every_public_method_is_fuzzed() -> None:
    specs = set(_specs(World(None, "sync", [], [], [])))
    assert set(METHODS) == specs
    assert set(ASYNC_METHODS) == specs


async def _fuzz(world: World, method: str, examples: int) -> None:
    spec = _specs(world)[method]
    part_name, name = method.split(".")
    function = getattr(getattr(world.tier, part_name), name)

    async def call(drawn: tuple[tuple[Any, ...], dict[str, Any]]) -> None:
        args, kwargs = drawn
        result = await outcome(lambda: function(*args, **kwargs))
        if result is not None and spec.use is not None:
            await spec.use(world.api, result)

    await hypothesize(spec.calls(), call, examples)


def by_turns(names: list[str], first: int) -> list[tuple[str, str]]:
    """Each name with the API it runs through, the two taking turns: the
    standalone run starts with sync, the Cluster run with asyncio, so every
    method is fuzzed through both facades."""
    return [(name, ("sync", "async")[(first + i) % 2]) for i, name in enumerate(names)]


@pytest.mark.parametrize("target", ["standalone"], indirect=True)
@pytest.mark.parametrize(("method", "api"), by_turns(METHODS, 0), indirect=["api"])
async def test_every_input_is_accepted_or_refused(world: World, method: str) -> None:
    await _fuzz(world, method, STANDALONE_EXAMPLES)


@pytest.mark.parametrize("target", ["cluster"], indirect=True)
@pytest.mark.parametrize(("method", "api"), by_turns(METHODS, 1), indirect=["api"])
async def test_every_input_is_accepted_or_refused_on_cluster(world: World, method: str) -> None:
    await _fuzz(world, method, CLUSTER_EXAMPLES)


# -- the book's functions -----------------------------------------------------------------------


def _view() -> str:
    return "rendered"


def _book_specs(conn: Any) -> dict[str, Spec]:
    """Specs of the book's functions, without their ``conn`` (the caller's
    redis-py client), except for :func:`book.tier_for`, whose only input it is."""
    tokens = maybe(st.builds(lambda: str(uuid.uuid4())))
    once = {"once": st.just(True)}  # a daemon's single pass
    urls = maybe(st.sampled_from(["/?item=42", "http://h/?item=%7B", "/x", "http://[", "/\ud800"]))
    return {
        "tier_for": Spec((maybe(st.just(conn)),)),
        "update_counter": Spec((NAMES, COUNTS, SECONDS)),
        "get_counter": Spec((NAMES, PRECISIONS)),
        "clean_counters": Spec(fixed=once),
        "schedule_row_cache": Spec((maybe(st.integers(0, 9)), maybe(st.just(60)))),
        "cache_rows": Spec(fixed={"load": maybe(st.just(_row)), **once}),
        "get_cached_row": Spec((maybe(st.integers(0, 9)),)),
        "update_stats": Spec((NAMES, TYPES, maybe(st.just(1.5)))),
        "get_stats": Spec((NAMES, TYPES)),
        "access_time": Spec((NAMES,), use=_time_a_block),
        "process_view": Spec((st.just(_view),), fixed={"path": NAMES}),
        "slowest": Spec((LIMITS,)),
        "rescale_viewed": Spec(fixed=once),
        "top_viewed": Spec((LIMITS,)),
        "view_rank": Spec((NAMES,)),
        "can_cache": Spec((urls,)),
        "cache_request": Spec((urls, st.just(lambda url: "page"))),
        "check_token": Spec((tokens,)),
        "update_token": Spec((tokens, NAMES, maybe(st.just("item:1")))),
        "clean_sessions": Spec((LIMITS,), fixed=once),
        "clean_full_sessions": Spec((LIMITS,), fixed=once),
        "add_to_cart": Spec((tokens, NAMES, COUNTS)),
        "get_cart": Spec((tokens,)),
        "recently_viewed": Spec((tokens,)),
    }


BOOK_FUNCTIONS = sorted(
    name
    for name, function in vars(book).items()
    if inspect.isfunction(function) and function.__module__ == book.__name__
    if not name.startswith("_")
)


def test_every_book_function_is_fuzzed() -> None:
    assert set(BOOK_FUNCTIONS) == set(_book_specs(None))


@pytest.mark.parametrize("target", ["standalone"], indirect=True)
@pytest.mark.parametrize("conn", [True], indirect=True, ids=["decoded"])
@pytest.mark.parametrize("function", BOOK_FUNCTIONS)
async def test_every_book_input_is_accepted_or_refused(conn: Any, function: str) -> None:
    spec = _book_specs(conn)[function]
    call_book = getattr(book, function)
    first = () if function == "tier_for" else (conn,)

    async def call(drawn: tuple[tuple[Any, ...], dict[str, Any]]) -> None:
        args, kwargs = drawn
        result = await outcome(lambda: call_book(*first, *args, **kwargs))
        if result is not None and spec.use is not None:
            await spec.use("sync", result)

    await hypothesize(spec.calls(), call, STANDALONE_EXAMPLES // 2)


# -- distinct names never share data --------------------------------------------------------


def _near(name: str) -> list[str]:
    """Names that differ from ``name`` only a little: a brace, a colon, a
    space, a Unicode normalisation, a case."""
    return [
        f"{name}{{", f"{{{name}", f"{name}}}", f"{name}:", f":{name}", f"{name} ", name.upper(),
        *(unicodedata.normalize(form, name) for form in ("NFC", "NFD", "NFKC", "NFKD")),
        name.replace(":", "{"), name.replace("{", ":"), name.replace("}", "{"),
    ]  # fmt: skip


def _valid(name: str) -> bool:
    try:
        check_name("name", name)
    except InvalidInput:
        return False
    return True


SMALL_NAMES = st.one_of(
    st.text(st.characters(exclude_categories=("Cc", "Cs")), min_size=1, max_size=12),
    st.lists(st.sampled_from([*SPECIAL, "a", "b", "1"]), min_size=1, max_size=6).map("".join),
)
PAIRS = st.one_of(
    SMALL_NAMES.flatmap(lambda a: st.tuples(st.just(a), st.sampled_from(_near(a)))),
    st.tuples(SMALL_NAMES, SMALL_NAMES),
).filter(lambda pair: pair[0] != pair[1] and _valid(pair[0]) and _valid(pair[1]))


async def _counters(world: World, a: str, b: str) -> None:
    counters = world.tier.counters
    before_a, before_b = await counters.get(a, 86400), await counters.get(b, 86400)
    await counters.record(a, 1, now=NOW)
    assert await counters.get(b, 86400) == before_b
    assert sum(n for _, n in await counters.get(a, 86400)) == sum(n for _, n in before_a) + 1
    assert a in await counters.names()


async def _stats(world: World, a: str, b: str) -> None:
    stats = world.tier.stats
    before_a, before_b = await stats.get(a, "Basket"), await stats.get(b, "Basket")
    await stats.record(a, "Basket", 2)
    assert (await stats.get(b, "Basket")).count == before_b.count
    assert (await stats.get(a, "Basket")).count == before_a.count + 1


async def _ranking(world: World, a: str, b: str) -> None:
    ranking = world.tier.ranking

    async def views() -> dict[str, float]:
        return dict(await ranking.top(1_000_000))

    before = await views()
    await ranking.record_view(a)
    after = await views()
    assert after.get(b) == before.get(b)
    assert after[a] == before.get(a, 0) + 1


async def _rows(world: World, a: str, b: str) -> None:
    rows, source = world.tier.rows, world.sources[0]
    assert await rows.get(source, a, load=True) == {"id": a}
    assert await rows.get(source, b, load=True) == {"id": b}
    assert await rows.get_many(source, [a, b]) == {a: {"id": a}, b: {"id": b}}
    await rows.invalidate(source, a)
    assert await rows.get(source, b) == {"id": b}


async def _sessions(world: World, a: str, b: str) -> None:
    sessions, token = world.tier.sessions, world.tokens[0]
    before_b = (await sessions.data(token)).get(b)
    await sessions.update(token, {a: [a]})
    data = await sessions.data(token)
    assert data.get(b) == before_b
    assert data[a] == [a]
    await sessions.discard(token, a)  # within the session's field limit


async def _carts(world: World, a: str, b: str) -> None:
    carts, token = world.tier.carts, world.tokens[0]
    await carts.clear(token)
    await carts.set(token, b, 1)
    await carts.set(token, a, 2)
    assert await carts.get(token) == {a: 2, b: 1}


async def _users(world: World, a: str, b: str) -> None:
    sessions = world.tier.sessions
    await sessions.revoke_all(a)
    await sessions.revoke_all(b)
    await sessions.new(user=a)
    assert await sessions.of_user(b) == []
    assert len(await sessions.of_user(a)) == 1


SHARING: dict[str, Callable[[World, str, str], Awaitable[None]]] = {
    "counters": _counters,
    "stats": _stats,
    "ranking": _ranking,
    "rows": _rows,
    "sessions": _sessions,
    "carts": _carts,
    "users": _users,
}


async def _distinct(world: World, capability: str, examples: int) -> None:
    check = SHARING[capability]

    async def body(pair: tuple[str, str]) -> None:
        await check(world, *pair)

    await hypothesize(PAIRS, body, examples)


@pytest.mark.parametrize("target", ["standalone"], indirect=True)
@pytest.mark.parametrize(("capability", "api"), by_turns(sorted(SHARING), 0), indirect=["api"])
async def test_distinct_names_never_share_data(world: World, capability: str) -> None:
    await _distinct(world, capability, STANDALONE_EXAMPLES // 2)


@pytest.mark.parametrize("target", ["cluster"], indirect=True)
@pytest.mark.parametrize(("capability", "api"), by_turns(sorted(SHARING), 1), indirect=["api"])
async def test_distinct_names_never_share_data_on_cluster(world: World, capability: str) -> None:
    await _distinct(world, capability, CLUSTER_EXAMPLES)
