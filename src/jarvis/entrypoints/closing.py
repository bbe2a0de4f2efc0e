"""``with`` and ``async with`` for the objects the entry points hand out (the SDK's
``Jarvis`` and conversations, the server thread): leaving the block calls ``close()``
(``aclose()``), written once here, so an exception in the block closes them too and is
never swallowed."""

from __future__ import annotations

from types import TracebackType


class CloseOnExit:
    """Leaving a ``with`` block calls :meth:`close`."""

    def close(self) -> None:
        raise NotImplementedError

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class AcloseOnExit:
    """Leaving an ``async with`` block awaits :meth:`aclose`."""

    async def aclose(self) -> None:
        raise NotImplementedError

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
