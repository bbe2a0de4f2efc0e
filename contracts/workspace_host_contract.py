"""The behaviour every WorkspaceHostPort implementation shows (the local host and the
in-memory test double alike).

A subclass provides two fixtures: ``host`` and ``world``, a :class:`HostWorld` naming what
that host holds: a directory reached through a symbolic link (and its real path), a path
that is no directory, and an environment variable that is set (and its value).
"""

from __future__ import annotations

from dataclasses import dataclass

from jarvis.domain.external_runtime import WorkspaceHostPort


@dataclass(frozen=True, slots=True, kw_only=True)
class HostWorld:
    linked_directory: str
    real_directory: str
    not_a_directory: str
    variable: str
    value: str


class WorkspaceHostContract:
    def test_the_working_directory_is_a_directory(self, host: WorkspaceHostPort) -> None:
        cwd = host.working_directory()
        assert cwd
        assert host.real_directory(cwd) is not None

    def test_a_directory_resolves_to_its_real_path(
        self, host: WorkspaceHostPort, world: HostWorld
    ) -> None:
        assert host.real_directory(world.linked_directory) == world.real_directory
        assert host.real_directory(world.real_directory) == world.real_directory

    def test_anything_else_is_no_directory(self, host: WorkspaceHostPort, world: HostWorld) -> None:
        assert host.real_directory(world.not_a_directory) is None
        assert host.real_directory(world.not_a_directory + "-missing") is None

    def test_variables_read_as_set_and_unset_ones_empty(
        self, host: WorkspaceHostPort, world: HostWorld
    ) -> None:
        assert host.variable(world.variable) == world.value
        assert host.variable(world.variable + "_NEVER_SET") == ""
