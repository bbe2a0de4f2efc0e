"""OpenJarvis's ``openjarvis.agents`` module paths (see :mod:`jarvis.compat`)."""
