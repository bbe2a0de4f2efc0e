"""The seccomp filter of the sandbox: system calls model-written code never needs.

The filter is compiled once per REPL factory by libseccomp (through ``pyseccomp``) into a
classic BPF program, which ``bwrap --seccomp FD`` installs on the worker before it starts.
The namespaces already keep the code away from the host; the filter removes the kernel
interfaces that sandbox escapes have used (new namespaces, ``ptrace``, keyrings, BPF,
``perf_event_open``, ``userfaultfd``, ``io_uring``, the new mount API, module loading,
terminal injection) and every socket but ``AF_UNIX``; also ``memfd_create`` and System V
shared memory and message queues, which hold memory that no process maps and no mount
shows, so that what the session holds can be measured (``memory_watch.py``); and
``setsockopt`` of ``SO_SNDBUF``/``SO_RCVBUF`` (and their ``FORCE`` forms), which would let
one socket queue up to the host's ``wmem_max`` (4 MB here) of kernel memory: sockets keep
the host's default buffer, which the sampler charges to every socket. A refused
call fails with ``EPERM`` (``EACCES`` for sockets), so Python raises an ``OSError`` rather
than dying. ``clone3`` fails with ``ENOSYS``: its flags cannot be inspected, and the C
library then falls back to ``clone``, whose namespace flags are refused.
"""

from __future__ import annotations

import contextlib
import errno
import os

AF_UNIX = 1
_TIOCSTI = 0x5412
_SOL_SOCKET = 1
_BUFFER_OPTIONS = (7, 8, 32, 33)  # SO_SNDBUF, SO_RCVBUF, SO_SNDBUFFORCE, SO_RCVBUFFORCE
_CLONE_NAMESPACE_FLAGS = (
    0x00020000,  # CLONE_NEWNS
    0x02000000,  # CLONE_NEWCGROUP
    0x04000000,  # CLONE_NEWUTS
    0x08000000,  # CLONE_NEWIPC
    0x10000000,  # CLONE_NEWUSER
    0x20000000,  # CLONE_NEWPID
    0x40000000,  # CLONE_NEWNET
)
REFUSED_SYSCALLS = (
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "mount",
    "umount",
    "umount2",
    "pivot_root",
    "chroot",
    "unshare",
    "setns",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "keyctl",
    "add_key",
    "request_key",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "reboot",
    "swapon",
    "swapoff",
    "acct",
    "syslog",
    "quotactl",
    "open_by_handle_at",
    "name_to_handle_at",
    "fanotify_init",
    "lookup_dcookie",
    "iopl",
    "ioperm",
    "vhangup",
    "memfd_create",
    "memfd_secret",
    "shmget",
    "msgget",
)


def build_filter() -> bytes | None:
    """The BPF program, or ``None`` where libseccomp cannot be loaded."""
    try:
        import pyseccomp as seccomp
    except (ImportError, OSError, RuntimeError):  # RuntimeError: libseccomp not found
        return None
    rules = seccomp.SyscallFilter(seccomp.ALLOW)
    for name in REFUSED_SYSCALLS:
        with contextlib.suppress(OSError, ValueError, RuntimeError):  # unknown here
            rules.add_rule(seccomp.ERRNO(errno.EPERM), name)
    rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    for flag in _CLONE_NAMESPACE_FLAGS:
        rules.add_rule(
            seccomp.ERRNO(errno.EPERM), "clone", seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag)
        )
    rules.add_rule(seccomp.ERRNO(errno.EACCES), "socket", seccomp.Arg(0, seccomp.NE, AF_UNIX))
    rules.add_rule(seccomp.ERRNO(errno.EPERM), "ioctl", seccomp.Arg(1, seccomp.EQ, _TIOCSTI))
    for option in _BUFFER_OPTIONS:
        rules.add_rule(
            seccomp.ERRNO(errno.EPERM),
            "setsockopt",
            seccomp.Arg(1, seccomp.EQ, _SOL_SOCKET),
            seccomp.Arg(2, seccomp.EQ, option),
        )
    memory = os.memfd_create("jarvis-repl-seccomp")
    try:
        with open(memory, "wb", closefd=False) as sink:
            rules.export_bpf(sink)
        os.lseek(memory, 0, os.SEEK_SET)
        chunks: list[bytes] = []
        while chunk := os.read(memory, 65536):
            chunks.append(chunk)
    finally:
        os.close(memory)
    program = b"".join(chunks)
    return program or None
