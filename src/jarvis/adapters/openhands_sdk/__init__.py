"""The ``openhands`` runtime: the openhands SDK in a Python 3.12+ of its own, driven over
stdio by a runner script (``runner_script.py``, run as a file, never imported here)."""

from jarvis.adapters.openhands_sdk.interpreter import find_python
from jarvis.adapters.openhands_sdk.runtime import OpenHandsRuntime

__all__ = ["OpenHandsRuntime", "find_python"]
