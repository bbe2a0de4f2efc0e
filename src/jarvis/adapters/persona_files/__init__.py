"""SOUL.md, MEMORY.md and USER.md (and named personas) kept as files in the config dir."""
