"""A tool as the domain knows it: its spec and result, its arguments' validator, its
description for text protocols."""
