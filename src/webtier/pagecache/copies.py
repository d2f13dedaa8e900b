"""A page's stored copy: what is kept of a render (its headers, its body,
gzip-compressed when that pays), and the bytes that hold it in Redis."""

from __future__ import annotations

import json
import struct
import zlib

from webtier.config import Config
from webtier.pagecache.holes import compressor
from webtier.types import Page, Rendered

_MAGIC = b"WPC1"
PASS_NOTE = b"WPASS"  # "rendered, but not storable": render without waiting
_HEADER = struct.Struct(">I")
# Never stored with a page: they describe one connection or one answer.
_NOT_STORED = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "content-length", "date", "age", "x-cache"}
)


def make_page(cfg: Config, rendered: Rendered, ttl: float, now: float) -> Page:
    """The copy to store of ``rendered``: compressed when that saves a tenth or more."""
    body = rendered.body
    headers = stored_headers(rendered.headers)
    etag = next((v for k, v in headers if k.lower() == "etag"), None)
    if rendered.holes:
        # Each answer's tag is its filled body's (webtier.web.pagecache.policy).
        headers = tuple((k, v) for k, v in headers if k.lower() != "etag")
        etag = ""
    elif etag is None:
        etag = weak_etag(body)
        headers = (*headers, ("etag", etag))
    gzipped = False
    encoded = any(k.lower() == "content-encoding" for k, _ in headers)
    if not encoded and len(body) >= cfg.pagecache.compress_min:
        packer = compressor(6, len(body), gzip=True)
        packed = packer.compress(body) + packer.flush()
        if len(packed) <= len(body) * 0.9:
            body, gzipped = packed, True
    return Page(rendered.status, headers, body, gzipped, etag, now, now + ttl, rendered.holes)


def weak_etag(body: bytes) -> str:
    """A tag of ``body``: weak, as it names the plain and the gzip representation."""
    return 'W/"' + zlib.crc32(body).to_bytes(4, "big").hex() + f'{len(body):x}"'


def stored_headers(headers: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    return tuple((k.lower(), v) for k, v in headers if k.lower() not in _NOT_STORED)


def encode(page: Page) -> bytes:
    meta = json.dumps(
        {
            "s": page.status,
            "h": page.headers,
            "z": page.gzipped,
            "e": page.etag,
            "t": page.stored,
            "f": page.fresh_until,
            **({"o": page.holes} if page.holes else {}),
        },
        separators=(",", ":"),
    ).encode()
    return b"".join((_MAGIC, _HEADER.pack(len(meta)), meta, page.body))


def decode(copy: bytes) -> Page | None:
    """The page of a stored copy; None for a pass note or an unknown format."""
    if not copy.startswith(_MAGIC):
        return None
    start = len(_MAGIC) + _HEADER.size
    (length,) = _HEADER.unpack_from(copy, len(_MAGIC))
    meta = json.loads(copy[start : start + length])
    headers = tuple((str(k), str(v)) for k, v in meta["h"])
    body = copy[start + length :]
    holes = tuple((int(offset), str(name)) for offset, name in meta.get("o", ()))
    return Page(meta["s"], headers, body, meta["z"], meta["e"], meta["t"], meta["f"], holes)
