"""``from jarvis.tools.calculator import CalculatorTool``."""

from jarvis.compat.tools import CalculatorTool

__all__ = ["CalculatorTool"]
