"""OpenJarvis's Python API as thin, typed adapters onto jarvis's own.

Code written for OpenJarvis runs with ``openjarvis`` replaced by ``jarvis`` in its imports:
the module paths it imports (``jarvis.agents.simple``, ``jarvis.core.registry``,
``jarvis.engine.ollama``, ``jarvis.sandbox``, ``jarvis.tools.calculator``...) re-export the
classes defined here, which take OpenJarvis's constructor arguments (``temperature=``,
``max_turns=``, ``sub_model=``, ``tools=[CalculatorTool()]``...) and build jarvis's agents,
engines and sandbox from them. jarvis's typed API (value objects, ``arun``, the registry's
``create(key, parts, options)``) stays the primary one; nothing in jarvis depends on this
package.
"""
