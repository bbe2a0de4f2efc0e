"""What operators keep between ticks: state by key, and leases."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from jarvis.domain.json_types import JSONValue

if TYPE_CHECKING:
    from jarvis.domain.owners import Owner


class OperatorStorePort(Protocol):
    """What operators keep between ticks, shared by every process on the store's database:
    JSON values by key (``operator:<id>:state``...) and leases, for schedulers on several
    machines that must run each tick exactly once.

    Every method raises :class:`~jarvis.domain.sessions.records.SessionStoreError` (never a driver
    exception) when the store fails, and changes nothing then; an invalid key is a
    ``ConfigurationError``. Lease times are the store's own clock (the database server's,
    for a shared one), so the clocks of the machines that share it need not agree.
    """

    async def get_state(self, key: str) -> JSONValue | None:
        """The value stored under ``key``, or ``None`` when there is none."""
        ...

    async def put_state(self, key: str, value: JSONValue, *, owner: Owner | None = None) -> None:
        """Store ``value`` under ``key`` in one atomic write (readers see the old value or
        the new one, never a mix); last writer wins. Refuses a value over
        :data:`~jarvis.domain.operators.MAX_STATE_BYTES` or with a non-finite number.

        With ``owner``, only while ``owner``'s definition is stored (under ``owner.key``,
        with ``owner.incarnation``), checked in the same transaction as the write: else
        :class:`~jarvis.domain.owners.OwnerGoneError`, and nothing is written. A delete or
        replacement of the definition waits for a write it checked, or goes first."""
        ...

    async def put_state_if_absent(
        self, key: str, value: JSONValue, *, owner: Owner | None = None
    ) -> bool:
        """Store ``value`` under ``key`` only while nothing is stored there, in one atomic
        write (checked and written in one statement the database serialises); ``False``,
        and nothing written, when a value is. Refuses what :meth:`put_state` refuses, and
        checks ``owner`` as it does. Adds a definition: of two processes adding one name
        at once exactly one wins, instead of the later replacing the earlier as a
        read-then-:meth:`put_state` would."""
        ...

    async def delete_state(self, prefix: str, *, owner: Owner | None = None) -> int:
        """Forget every key that starts with ``prefix`` (at least 3 characters); how many.

        With ``owner`` (the definition whose state it is), only while ``owner``'s definition
        is stored, checked in the same transaction as the deletion, as for
        :meth:`put_state`: else :class:`~jarvis.domain.owners.OwnerGoneError`, and nothing
        is deleted (the keys may be those of a definition added again since under the same
        name). With the :func:`~jarvis.domain.owners.vacancy` of a definition, only while
        none is stored (an addition clears an earlier one's leftovers so)."""
        ...

    async def delete_key(self, key: str, *, owner: Owner | None = None) -> bool:
        """Forget the value stored under exactly ``key`` (never a longer key it is the
        start of, as :meth:`delete_state` would); whether there was one.

        With ``owner``, only while ``owner``'s definition is stored, checked in the same
        transaction (else ``OwnerGoneError``, and nothing deleted), as for
        :meth:`delete_state`. ``key`` may be ``owner.key`` itself: the definition is then
        removed only while it is the very one read, never one removed and added again
        meanwhile (its row is locked for the deletion, as a replacement locks it)."""
        ...

    async def state_keys(self, prefix: str) -> list[str]:
        """The keys that start with ``prefix``, sorted (byte order)."""
        ...

    async def acquire_lease(self, name: str, holder: str, ttl_seconds: float) -> bool:
        """Take lease ``name`` for ``holder`` until ``ttl_seconds`` from now: ``True`` when
        it was free, expired, or already ``holder``'s (then it is extended); ``False`` when
        another holder has it. Atomic across processes and machines."""
        ...

    async def renew_lease(self, name: str, holder: str, ttl_seconds: float) -> bool:
        """Extend ``holder``'s lease to ``ttl_seconds`` from now; ``False`` when it is not
        (or no longer) ``holder``'s."""
        ...

    async def release_lease(self, name: str, holder: str) -> None:
        """Give the lease up if ``holder`` has it (another holder's is left alone)."""
        ...

    async def claim_tick(
        self, operator_id: str, tick_us: int, holder: str, ttl_seconds: float
    ) -> bool:
        """Claim the tick of ``operator_id`` scheduled at ``tick_us`` (microseconds since the
        epoch): ``True`` for exactly one claimant while the tick is neither completed nor
        held; a claim not completed within its ttl (the claimant died) can be taken again.
        Renew it with :meth:`renew_lease` on :func:`~jarvis.domain.operators.tick_lease`."""
        ...

    async def complete_tick(self, operator_id: str, tick_us: int, holder: str) -> bool:
        """Mark ``holder``'s claimed tick done: it can never be claimed again. Forgets the
        operator's completed ticks older than this one. ``False`` when the claim was not
        (or no longer) ``holder``'s."""
        ...
