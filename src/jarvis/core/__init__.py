"""OpenJarvis's ``openjarvis.core`` module paths (see :mod:`jarvis.compat`)."""
