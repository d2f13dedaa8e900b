"""Holes in cached pages without a server: markers split out of a render,
filled per visitor, escaped, gzip-compressed from parts; and the two
operations whose first round trips go as one (protocol.together)."""

from __future__ import annotations

import gzip
import random
import zlib

import pytest

from webtier._core.protocol import read, together
from webtier.config import Config
from webtier.errors import ConfigError
from webtier.pagecache.copies import decode, encode, make_page
from webtier.pagecache.holes import (
    ANONYMOUS,
    Holes,
    Visit,
    compressor,
    deflated,
    filled,
    gzip_filled,
    segments,
)
from webtier.types import Rendered


class Markup(str):
    """HTML, as markupsafe's Markup and Django's SafeString say it (no web
    framework in the unit tests' environment)."""

    def __html__(self) -> str:
        return str(self)


HOLES = Holes(
    {
        "who": lambda visit: visit.user or "guest",
        "cart": lambda visit: visit.cart_units,
        "html": lambda visit: Markup("<b>bold</b>"),
    }
)


def test_a_render_splits_into_a_body_without_markers_and_the_places_of_its_holes() -> None:
    body = f"<p>{HOLES.mark('who')}</p><i>{HOLES.mark('cart')}{HOLES.mark('who')}</i>".encode()
    plain, places = HOLES.split(body)
    assert plain == b"<p></p><i></i>"
    assert places == ((3, "who"), (10, "cart"), (10, "who"))
    fills = HOLES.fills_for(places, Visit(user="ann", cart={"a": 2, "b": 1}))
    assert filled(plain, places, fills) == b"<p>ann</p><i>3ann</i>"
    assert filled(plain, places, HOLES.fills_for(places, ANONYMOUS)) == b"<p>guest</p><i>0guest</i>"


def test_a_hole_may_take_an_argument_of_the_page() -> None:
    holes = Holes({"count": lambda visit, item: visit.cart.get(item, 0)})
    body = f"{holes.mark('count', 7)}/{holes.mark('count', 'x-1')}/{holes.mark('count', 7)}"
    plain, places = holes.split(body.encode())
    assert places == ((0, "count 7"), (1, "count x-1"), (2, "count 7"))
    fills = holes.fills_for(places, Visit(cart={"7": 3}))
    assert filled(plain, places, fills) == b"3/0/3"
    for bad in ("two words", "-->", "", "x" * 65):
        with pytest.raises(ConfigError):
            holes.mark("count", bad)


def test_a_page_without_markers_has_no_holes() -> None:
    assert HOLES.split(b"<p>plain</p>") == (b"<p>plain</p>", ())


def test_text_posing_as_a_marker_is_left_as_it_is() -> None:
    # Without the process's secret, a page's content cannot open a hole.
    forged = b"<!--webtier-hole 00000000000000000000000000000000 who-->"
    other = Holes({"who": lambda visit: "x"}).mark("who").encode()
    assert HOLES.split(forged + other) == (forged + other, ())


def test_fills_are_escaped_unless_they_are_markup() -> None:
    holes = Holes({"t": lambda visit: visit.user, "m": lambda visit: Markup("<b>x</b>")})
    plain, places = holes.split(f"{holes.mark('t')}|{holes.mark('m')}".encode())
    fills = holes.fills_for(places, Visit(user="<script>&"))
    assert filled(plain, places, fills) == b"&lt;script&gt;&amp;|<b>x</b>"
    assert holes.fills_for(places, ANONYMOUS)[0] == b""  # None: nothing


def test_markers_are_html_to_templates() -> None:
    mark = HOLES.mark("who")
    assert mark.__html__() == mark  # Jinja2's autoescape and Django's leave it as it is


def test_a_hole_the_process_does_not_know_stays_empty() -> None:
    assert HOLES.fills_for(((0, "gone"),), ANONYMOUS) == [b""]


@pytest.mark.parametrize(
    "fills", [{}, {"1st": lambda visit: ""}, {"a b": lambda visit: ""}, {"ok": "not callable"}]
)
def test_holes_are_named_and_have_functions(fills: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        Holes(fills)  # type: ignore[arg-type]


def test_an_unknown_hole_cannot_be_marked() -> None:
    with pytest.raises(ConfigError, match="no hole is named"):
        HOLES.mark("nope")


@pytest.mark.parametrize("fill_sizes", [(0, 0), (5, 0), (0, 300), (40, 4000)])
def test_gzip_from_parts_is_the_gzip_of_the_filled_page(fill_sizes: tuple[int, int]) -> None:
    plain = b"".join([b"<header>", b"a" * 3000, b"</header><main>", b"lorem " * 500, b"</main>"])
    places = ((8, "who"), (3023, "cart"))
    fills = [b"x" * fill_sizes[0], bytes(range(256)) * (fill_sizes[1] // 256)]
    whole = filled(plain, places, fills)
    packed = gzip_filled([deflated(part) for part in segments(plain, places)], fills, whole)
    assert gzip.decompress(packed) == whole
    assert zlib.decompress(packed, 31) == whole  # one member, nothing after it
    assert len(packed) < len(whole) / 3


@pytest.mark.parametrize("size", [0, 1, 511, 512, 513, 2048, 2049, 32_768, 32_769, 200_000])
def test_a_compressor_sized_to_its_data_is_read_by_any_inflater(size: int) -> None:
    # Repeats far apart, then random bytes: a window too small for the data
    # would lose the matches, never the data; anything read must be whole.
    data = (bytes(range(256)) * (size // 256 + 1))[:size]
    data = data[: size // 2] + random.Random(size).randbytes(size - size // 2)
    packer = compressor(6, len(data), gzip=True)
    assert gzip.decompress(packer.compress(data) + packer.flush()) == data
    raw = compressor(1, len(data), gzip=False)
    assert zlib.decompress(raw.compress(data) + raw.flush(), -15) == data


def test_a_stored_page_keeps_its_holes_and_takes_its_tag_per_answer() -> None:
    cfg = Config()
    rendered = Rendered(200, (("etag", '"app"'),), b"<p></p>" * 200, 60, holes=((3, "who"),))
    page = make_page(cfg, rendered, 60, 1000.0)
    assert page.etag == ""
    assert all(k != "etag" for k, _ in page.headers)
    again = decode(encode(page))
    assert again is not None
    assert again.holes == ((3, "who"),)
    assert again.plain_body() == rendered.body


def test_two_operations_share_their_first_round_trip() -> None:
    def first():  # type: ignore[no-untyped-def]
        (a,) = yield read("r", ("GET", "a"))
        more = yield (read("r", ("GET", "b")), read("s", ("GET", "c")))
        return a, more

    def second():  # type: ignore[no-untyped-def]
        (d,) = yield (read("s", ("GET", "d")),)
        try:
            yield read("s", ("GET", "e"))
        except KeyError:
            return d, "handled"
        return d, "not reached"

    both = together(first(), second())
    joint = next(both)
    assert [r.commands for r in joint] == [(("GET", "a"),), (("GET", "d"),)]
    step = both.send([[b"A"], [b"D"]])
    assert [r.commands for r in step] == [(("GET", "b"),), (("GET", "c"),)]
    step = both.send([[b"B"], [b"C"]])
    assert step.commands == (("GET", "e"),)
    with pytest.raises(StopIteration) as done:
        both.throw(KeyError("e"))  # the second's own failure: its own to handle
    assert done.value.value == ((b"A", [[b"B"], [b"C"]]), ([b"D"], "handled"))


def test_a_failed_joint_step_fails_both() -> None:
    closed = []

    def op(name: str):  # type: ignore[no-untyped-def]
        try:
            yield read("r", ("GET", name))
        finally:
            closed.append(name)
        return name

    both = together(op("a"), op("b"))
    next(both)
    with pytest.raises(ConnectionError):
        both.throw(ConnectionError("down"))
    assert sorted(closed) == ["a", "b"]


def test_an_operation_without_io_runs_beside_one_with_it() -> None:
    def none():  # type: ignore[no-untyped-def]
        return "done"
        yield  # a generator

    both = together(none(), (x for x in [read("r", ("GET", "a"))]))
    step = next(both)
    assert step.commands == (("GET", "a"),)
    with pytest.raises(StopIteration) as done:
        both.send([b"A"])
    assert done.value.value == ("done", None)
