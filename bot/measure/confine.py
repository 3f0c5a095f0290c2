"""Limits applied to a kernel's process before it starts (in the child, between fork and exec).

- memory: RLIMIT_AS (address space) or RLIMIT_DATA (data segment and private writable
  mappings). GPU drivers reserve far more address space than memory (CUDA maps terabytes of
  virtual space at init), so an address-space cap breaks every GPU kernel; there RLIMIT_DATA
  caps what is actually allocated on the host.
- CPU time: RLIMIT_CPU, soft limit SIGXCPU, hard limit 5 s later SIGKILL.
- file size: RLIMIT_FSIZE, so a kernel cannot fill the disk through a single file.
- file-system writes: Landlock (Linux >= 5.13 with the Landlock LSM enabled). The child may
  create, change, rename or delete files only below the folders given; everything else,
  the user's checkout, tunebot's worktree and records included, is read-only to it. Reads and
  executing programs are not restricted. Where Landlock is missing, nothing is enforced here and
  `landlock_abi()` says so (the run's tamper check still catches changes afterwards).
"""

from __future__ import annotations

import ctypes
import functools
import os
import resource
from dataclasses import dataclass, field
from pathlib import Path

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446  # same on x86_64 and aarch64
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38
_O_PATH = getattr(os, "O_PATH", 0o10000000)

# LANDLOCK_ACCESS_FS_* bits that change the file system, by the ABI version that added them
_WRITE_ACCESS = {
    1: (1 << 1)
    | (1 << 4)
    | (1 << 5)
    | (1 << 6)
    | (1 << 7)
    | (1 << 8)
    | (1 << 9)
    | (1 << 10)
    | (1 << 11)
    | (1 << 12),
    2: 1 << 13,  # REFER (link or rename across folders)
    3: 1 << 14,  # TRUNCATE
}


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


@functools.cache
def _lib():
    """The C library with syscall and prctl typed (loaded once); None where unavailable."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        libc.prctl.argtypes = [
            ctypes.c_int,
            ctypes.c_ulong,
            ctypes.c_ulong,
            ctypes.c_ulong,
            ctypes.c_ulong,
        ]
    except (OSError, AttributeError):
        return None
    return libc


@functools.cache
def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 when Landlock is not available (asked once)."""
    lib = _lib()
    version = (
        lib.syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), _CREATE_RULESET_VERSION)
        if lib
        else -1
    )
    return max(0, int(version))


def _handled(abi: int) -> int:
    return sum(bits for version, bits in _WRITE_ACCESS.items() if version <= abi)


@dataclass(frozen=True)
class Limits:
    """What a kernel's process may use. None: not limited."""

    memory_mb: int | None = None
    memory_kind: str = "as"  # "as": RLIMIT_AS; "data": RLIMIT_DATA (GPU backends)
    cpu_s: float | None = None
    file_size_mb: int | None = None
    writable: tuple[Path, ...] | None = None  # None: writes not restricted; else only below these

    def describe(self) -> dict:
        abi = landlock_abi()
        return {
            "memory_mb": self.memory_mb,
            "memory_rlimit": f"RLIMIT_{self.memory_kind.upper()}",
            "cpu_s": self.cpu_s,
            "file_size_mb": self.file_size_mb,
            "writes": ("landlock" if abi and self.writable is not None else "unrestricted"),
            "writable": [str(p) for p in self.writable or ()],
        }


@dataclass
class _Plan:
    rlimits: list[tuple[int, int, int]] = field(default_factory=list)
    writable: list[bytes] = field(default_factory=list)
    handled: int = 0


def child_hook(limits: Limits):
    """A preexec function applying `limits`; everything that can fail is resolved in the parent."""
    plan = _Plan()
    if limits.memory_mb:
        kind = resource.RLIMIT_DATA if limits.memory_kind == "data" else resource.RLIMIT_AS
        size = int(limits.memory_mb) * 1024 * 1024
        plan.rlimits.append((kind, size, size))
    if limits.cpu_s:
        soft = max(1, int(limits.cpu_s + 0.999))
        plan.rlimits.append((resource.RLIMIT_CPU, soft, soft + 5))
    if limits.file_size_mb:
        size = int(limits.file_size_mb) * 1024 * 1024
        plan.rlimits.append((resource.RLIMIT_FSIZE, size, size))
    abi = landlock_abi()
    if limits.writable is not None and abi:
        plan.handled = _handled(abi)
        plan.writable = [os.fsencode(str(p)) for p in limits.writable if Path(p).is_dir()]
    lib = _lib()

    def apply() -> None:
        for kind, soft, hard in plan.rlimits:
            resource.setrlimit(kind, (soft, hard))
        if plan.handled and lib:
            _restrict_writes(lib, plan)

    return apply


def _restrict_writes(lib, plan: _Plan) -> None:
    attr = ctypes.c_uint64(plan.handled)
    ruleset = lib.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(8), 0)
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")
    try:
        for path in plan.writable:
            fd = os.open(path, _O_PATH | os.O_CLOEXEC)
            try:
                rule = _PathBeneath(plan.handled, fd)
                if (
                    lib.syscall(
                        _SYS_ADD_RULE,
                        ctypes.c_int(ruleset),
                        _RULE_PATH_BENEATH,
                        ctypes.byref(rule),
                        0,
                    )
                    < 0
                ):
                    raise OSError(ctypes.get_errno(), f"landlock_add_rule failed for {path!r}")
            finally:
                os.close(fd)
        if lib.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        if lib.syscall(_SYS_RESTRICT_SELF, ctypes.c_int(ruleset), 0) < 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
    finally:
        os.close(ruleset)
