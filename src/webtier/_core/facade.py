"""Binds I/O-free operations to a transport, for the sync and asyncio facades.

A facade class lists its operations once, ``record = sync_op(counters.record)``
in :mod:`webtier.sync`, ``record = async_op(counters.record)`` in
:mod:`webtier.aio`. Calling ``tier.counters.record(...)`` then builds the
operation with the tier's config and drives it through the tier's transport:
the sync transport returns the result, the asyncio one a coroutine. Each
operation's logic exists once; type checkers see the operation's own
parameters, minus the config, on both facades.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Concatenate, Generic, ParamSpec, Protocol, TypeVar

from webtier._core.protocol import Op
from webtier.config import Config

P = ParamSpec("P")
T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class Part:
    """Base of a facade part: a config and a way to run operations."""

    def __init__(self, run: Callable[[Op[Any]], Any], config: Config) -> None:
        self._run = run
        self._config = config


class _Bound(Generic[P, T]):
    def __init__(self, op: Callable[Concatenate[Config, P], Op[T]]) -> None:
        self._op = op
        self._name = op.__name__
        self.__doc__ = op.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    def __get__(self, part: Part | None, owner: type | None = None) -> Any:
        if part is None:
            return self
        op, config, run = self._op, part._config, part._run

        @functools.wraps(op)
        def call(*args: Any, **kwargs: Any) -> Any:
            return run(op(config, *args, **kwargs))

        # help() and IDEs show the operation's parameters without the config.
        signature = inspect.signature(op)
        call.__signature__ = signature.replace(  # type: ignore[attr-defined]
            parameters=list(signature.parameters.values())[1:]
        )
        part.__dict__[self._name] = call  # bind once per part
        return call


if TYPE_CHECKING:

    class SyncOp(Protocol[P, T_co]):
        def __get__(self, part: Any, owner: Any = None) -> Callable[P, T_co]: ...

    class AsyncOp(Protocol[P, T_co]):
        def __get__(
            self, part: Any, owner: Any = None
        ) -> Callable[P, Coroutine[Any, Any, T_co]]: ...


def sync_op(op: Callable[Concatenate[Config, P], Op[T]]) -> SyncOp[P, T]:
    return _Bound(op)


def async_op(op: Callable[Concatenate[Config, P], Op[T]]) -> AsyncOp[P, T]:
    return _Bound(op)
