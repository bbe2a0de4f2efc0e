"""Which file paths are secrets that no tool may read, whatever the folder rules allow.

The rules are matched against every component of a path (case-insensitively, for
case-insensitive filesystems), so a secret deep inside an allowed folder is still refused.
Tools check the whole absolute path, so a root that is (or lies inside) a secret folder
such as ``~/.ssh`` is refused too, not only the components below the root.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Sequence
from typing import Final

SECRET_NAMES: Final = (
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".password-store",
    ".env",
    ".env.*",
    "*.env",
    ".envrc",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "*.jks",
    "*.keystore",
    "id_*",
    "credentials*",
    ".netrc",
    "_netrc",
    ".pgpass",
    ".npmrc",
    ".pypirc",
    ".git-credentials",
    ".htpasswd",
    ".vault-token",
    ".secret",
    "*.secret",
    "*.secrets",
    "*_history",
    ".histfile",
    ".history",
    "shadow",
    "gshadow",
    ".s3cfg",
    ".passwd-s3fs",
    "rclone.conf",
    ".boto",
    ".gitcookies",
    ".dockercfg",
    ".my.cnf",
    ".terraformrc",
    ".databrickscfg",
    ".oci",
    "*.kdbx",
    "*.ppk",
    "login data",
    "cookies",
    "cookies.sqlite",
    "logins.json",
    "key4.db",
)
"""fnmatch patterns for one path component (a file or a folder anywhere in the path)."""

SECRET_SEQUENCES: Final = (
    (".config", "gcloud"),
    (".kube", "config"),
    (".docker", "config.json"),
    (".config", "gh", "hosts.yml"),
    (".config", "hub"),
    ("huggingface", "token"),
    ("huggingface", "stored_tokens"),
    (".huggingface", "token"),
    (".local", "share", "keyrings"),
    (".subversion", "auth"),
    (".config", "op"),
    (".openjarvis", "config.toml"),
    ("openjarvis", "config.toml"),
)
"""Consecutive components that together name a secret (a folder or a file in a folder)."""


def secret_rule(components: Sequence[str]) -> str | None:
    """The rule that makes ``components`` a secret path, or None when it is not one."""
    folded = [part.casefold() for part in components if part]
    for part in folded:
        for pattern in SECRET_NAMES:
            if fnmatch.fnmatchcase(part, pattern):
                return pattern
    for sequence in SECRET_SEQUENCES:
        width = len(sequence)
        for start in range(len(folded) - width + 1):
            if tuple(folded[start : start + width]) == sequence:
                return "/".join(sequence)
    return None


def secret_rule_of_paths(*paths: str) -> str | None:
    """The first rule any of ``paths`` (absolute) matches. A file a config names is checked
    as written and as resolved: a dotfile manager's ``~/.config`` is often a link, so the
    resolved path alone would miss ``.config/gcloud``."""
    for path in paths:
        rule = secret_rule(path.split(os.sep))
        if rule is not None:
            return rule
    return None
