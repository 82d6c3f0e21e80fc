"""The one file writer of evalbook: atomic, and write-once unless asked otherwise.

What it guarantees:
- no reader ever sees half a file: the data goes to a temporary file in the same folder, which
  then takes the final name in one step (a hard link, or a rename when replacing);
- write-once by default: an existing file is refused with FileExistsError, also when two writers
  race for the same name, and nothing of the loser is left behind;
- a written file has the mode any file made by this process gets (0666 less the umask), not
  the private 0600 of a temporary file;
- a failed write leaves no temporary file behind (`.<name>.<random>.tmp` while in flight).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _current_umask()


def write_atomically(path: Path, data: bytes, overwrite: bool = False) -> None:
    """Write `data` to `path` through a temporary file in the same folder, so no reader ever
    sees half a file. Without `overwrite` an existing file is refused (FileExistsError); with
    it, the earlier file is replaced only once the new one is complete."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        # mkstemp makes the file private (0600); outputs are meant to be shared like any file
        os.fchmod(handle, 0o666 & ~_UMASK)
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        if overwrite:
            os.replace(temporary, path)
        else:
            os.link(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def write_new(path: Path, data: bytes) -> None:
    """Write `data` to `path` atomically, refusing to replace an existing file."""
    write_atomically(path, data, overwrite=False)
