"""OpenJarvis's ``openjarvis.tools`` module paths (see :mod:`jarvis.compat.tools`)."""
