"""Lua scripts, one file each in the folder of the capability that runs it,
run by SHA.

A script is loaded from its package once, at import of the module that uses
it (``Script.load(__package__, "counter_record")``), and kept as an
immutable value; there is no registry. The transport sends
``EVALSHA`` and, when a server answers ``NOSCRIPT`` (restarted, flushed, or a
promoted Cluster replica that never saw ``SCRIPT LOAD``), loads the source on
that node and sends the call again: a NOSCRIPT call was never run, so this is
safe even for writes.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from importlib.resources import files


def _read(package: str, name: str) -> bytes:
    return files(package).joinpath(f"{name}.lua").read_bytes()


@dataclass(frozen=True, slots=True)
class Script:
    name: str
    source: bytes = field(repr=False)
    sha: str

    @classmethod
    def load(cls, package: str, name: str, *, prelude: str | None = None) -> Script:
        """The script ``<name>.lua`` of ``package`` (the caller's
        ``__package__``), after ``<prelude>.lua`` of the same package when
        given: the functions several scripts share live once, in the prelude."""
        source = _read(package, name)
        if prelude is not None:
            source = _read(package, prelude) + source
        return cls(name, source, hashlib.sha1(source).hexdigest())  # noqa: S324 (Redis names scripts by SHA-1)

    def constant(self, name: str) -> int:
        """The integer a script sets with ``local NAME = <digits>``: the one
        place such a figure lives, when Python needs it too."""
        found = re.search(rb"^local %s = (\d+)$" % name.encode(), self.source, re.MULTILINE)
        if found is None:
            raise LookupError(f"{self.name}.lua sets no constant {name}")
        return int(found[1])
