"""Tools: the built-in tools that need no I/O of their own, declaring tools from typed
Python functions, and the catalogue that builds the tools a run asks for by name.

Tools that touch the filesystem or the network are adapters (``jarvis.adapters``); the
container hands them to the :class:`~jarvis.application.tools.catalogue.ToolCatalogue`.
"""
