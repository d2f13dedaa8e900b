"""Holes in cached pages: one copy of a page for every visitor, each
visitor's parts filled in as it goes out (the idea of Varnish's Edge Side
Includes, with the visitor's session read in the page's own round trip).

A template writes ``hole("greeting")`` where a per-visitor part goes; the
render carries a marker there (an HTML comment holding a secret of the
process, so no text of the page's content can pose as one). What is stored
is the page without its markers and the places of its holes
(:func:`split`); every answer, the render's own too, fills each place with
what the app's function for that hole makes of the visitor's session
(:class:`Visit`). The functions are pure: no SQL, no Redis, only the
session's data, so a filled hit costs the page's round trip and nothing
more.

No I/O here: the middlewares read the session (:mod:`webtier.web.asgi`).
"""

from __future__ import annotations

import html
import itertools
import re
import secrets
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from webtier.errors import ConfigError

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")
_ARGUMENT = re.compile(r"[A-Za-z0-9_.:-]{1,64}")

# (offset in the page's body, hole), in order; a hole is its name, or its
# name, a space and the argument its marker gave ("in_cart 42").
Places = tuple[tuple[int, str], ...]


@dataclass(frozen=True, slots=True)
class Visit:
    """What a hole's function knows of the visitor: their session's user,
    data, cart and recently viewed items (newest first); all empty for a
    visitor without a session."""

    user: str | None = None
    data: Mapping[str, Any] = field(default_factory=dict)
    cart: Mapping[str, int] = field(default_factory=dict)
    viewed: tuple[str, ...] = ()

    @property
    def cart_units(self) -> int:
        return sum(self.cart.values())


ANONYMOUS = Visit()


class Mark(str):
    """A hole's marker: text that templates must not escape (Jinja2's
    ``Markup`` and Django's ``conditional_escape`` honour ``__html__``)."""

    __slots__ = ()

    def __html__(self) -> str:
        return str(self)


class Holes:
    """The holes an app's pages may have, each with the function that fills
    it from a :class:`Visit`. A function returns HTML (an object with
    ``__html__``, such as ``markupsafe.Markup``) or text, which is escaped.

    ``mark(name)`` is what a template writes where the hole goes: in
    Jinja2, ``env.globals["hole"] = holes.mark``; in a Django template, a
    simple tag returning it; in plain HTML, the string it returns.
    ``mark(name, argument)`` passes the fill a word of the page's own (an
    item id: ``fill(visit, "42")``), so one function fills the hole for
    every item."""

    def __init__(self, fills: Mapping[str, Callable[..., object]]) -> None:
        if not isinstance(fills, Mapping) or not fills:
            raise ConfigError("Holes needs a mapping of hole names to their fill functions")
        for name, fill in fills.items():
            if not isinstance(name, str) or not _NAME.fullmatch(name):
                raise ConfigError(
                    f"a hole's name is a letter then letters, digits, '_' or '-' (got {name!r})"
                )
            if not callable(fill):
                raise ConfigError(f"the hole {name!r} needs a function of a Visit")
        self.fills = dict(fills)
        # Known to this process only: a page's text cannot forge a marker,
        # so no visitor's data is ever put where the page's content said.
        self._secret = secrets.token_hex(16)
        names = "|".join(map(re.escape, self.fills))
        self._marker = re.compile(
            rf"<!--webtier-hole {self._secret} ((?:{names})(?: {_ARGUMENT.pattern})?)-->".encode()
        )

    def mark(self, name: str, argument: object = None) -> Mark:
        """The marker of hole ``name`` (with ``argument``, a word: letters,
        digits, ``_.:-``) for a template."""
        if name not in self.fills:
            raise ConfigError(f"no hole is named {name!r} (known: {', '.join(self.fills)})")
        if argument is None:
            return Mark(f"<!--webtier-hole {self._secret} {name}-->")
        word = str(argument)
        if not _ARGUMENT.fullmatch(word):
            raise ConfigError(f"a hole's argument is a word of letters, digits, '_.:-' ({word!r})")
        return Mark(f"<!--webtier-hole {self._secret} {name} {word}-->")

    def split(self, body: bytes) -> tuple[bytes, Places]:
        """``body`` without its markers, and the places of its holes."""
        parts: list[bytes] = []
        places: list[tuple[int, str]] = []
        offset = start = 0
        for found in self._marker.finditer(body):
            parts.append(body[start : found.start()])
            offset += found.start() - start
            places.append((offset, found.group(1).decode()))
            start = found.end()
        if not places:
            return body, ()
        parts.append(body[start:])
        return b"".join(parts), tuple(places)

    def fills_for(self, places: Places, visit: Visit) -> list[bytes]:
        """What goes in each place for ``visit``. A hole this process does
        not know (a page stored by another version of the app) stays empty."""
        made: dict[str, bytes] = {}
        out = []
        for _, hole in places:
            if hole not in made:
                name, _, argument = hole.partition(" ")
                fill: Callable[..., object] | None = self.fills.get(name)
                if fill is None:
                    made[hole] = b""
                else:
                    value = fill(visit, argument) if argument else fill(visit)
                    made[hole] = _html(value).encode()
            out.append(made[hole])
        return out


def _html(value: object) -> str:
    markup = getattr(value, "__html__", None)
    if markup is not None:
        return str(markup())
    return html.escape("" if value is None else str(value))


def filled(body: bytes, places: Places, fills: Sequence[bytes]) -> bytes:
    """``body`` with ``fills[i]`` put at ``places[i]``."""
    parts = []
    start = 0
    for (offset, _), fill in zip(places, fills, strict=True):
        parts += [body[start:offset], fill]
        start = offset
    parts.append(body[start:])
    return b"".join(parts)


def segments(body: bytes, places: Places) -> list[bytes]:
    """The parts of ``body`` between its holes (one more than ``places``)."""
    bounds = [0, *(offset for offset, _ in places), len(body)]
    return [body[a:b] for a, b in itertools.pairwise(bounds)]


# -- gzip of a filled page, without compressing the page again -------------------------
#
# Each part between holes is compressed once (raw deflate, ended by a sync
# flush: byte-aligned and self-contained); an answer compresses only its
# fills and joins the pieces into one gzip member. Deflate blocks may follow
# each other from separate compressors: each refers back only within its
# own data, which sits at the same distance in the joined stream.

_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
_FINAL_BLOCK = b"\x03\x00"  # an empty fixed-Huffman block with BFINAL set


def compressor(level: int, size: int, *, gzip: bool) -> zlib._Compress:
    """A zlib compressor (gzip, or raw deflate) for ``size`` bytes, its
    window and hash table no larger than they need. Setting up zlib's
    default state (32 KB window, 128 KB of hash) costs some 45 µs, more
    than compressing a page of a few KB; a window of the next power of two
    above ``size`` finds the same matches (none reaches back further than
    the data) in a fifth of the time, and any inflater (a 32 KB window)
    reads the result."""
    bits = min(15, max(9, (size - 1).bit_length()))
    return zlib.compressobj(level, zlib.DEFLATED, bits + 16 if gzip else -bits, max(1, bits - 7))


def deflated(part: bytes, level: int = 6) -> bytes:
    packer = compressor(level, len(part), gzip=False)
    return packer.compress(part) + packer.flush(zlib.Z_SYNC_FLUSH)


def gzip_filled(packed_parts: Sequence[bytes], fills: Sequence[bytes], plain: bytes) -> bytes:
    """The gzip of ``plain`` (the filled page), from its parts between
    holes already deflated (:func:`deflated`) and its ``fills``."""
    pieces = [_GZIP_HEADER]
    for packed, fill in zip(packed_parts, fills, strict=False):
        pieces += [packed, deflated(fill, 1) if fill else b""]
    pieces += [packed_parts[-1], _FINAL_BLOCK]
    trailer = (zlib.crc32(plain) & 0xFFFFFFFF).to_bytes(4, "little")
    pieces += [trailer, (len(plain) & 0xFFFFFFFF).to_bytes(4, "little")]
    return b"".join(pieces)
