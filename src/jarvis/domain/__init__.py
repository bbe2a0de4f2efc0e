"""The pure core of jarvis: value objects, ports and agent-loop policies.

Nothing in here performs I/O or imports a framework; it depends on the standard library
and pydantic only. Adapters implement the ports declared in :mod:`jarvis.domain.ports`.
"""
