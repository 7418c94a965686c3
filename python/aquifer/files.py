"""aquifer.open: files of the store as Python file objects.

    with aquifer.open("aquifer://node:9000/ckpt/step-100.pt", "wb") as f:
        torch.save(state, f)                  # stored whole at close, or not at all
    with aquifer.open("aquifer://node:9000/ckpt/step-100.pt", "rb") as f:
        state = torch.load(f)

A file opened for writing is spooled to an unlinked local file; past the
multipart threshold its parts are sent in the background as they fill
(AQUIFER_PART_SIZE, AQUIFER_PARALLEL), and it appears in the store only when
close() returns: a reader never sees part of it, and a `with` block left by
an exception, a file dropped without close() (a ResourceWarning says so) or
a process killed stores nothing (the previous version, if any, stays). Seeks back into the file
(zip headers, as torch.save and np.savez write them) are allowed. Reads are
ranged GETs pinned to the version seen at open (a file replaced while read
raises instead of mixing versions), buffered 8 MiB at a time, fetched as
parallel ranges. Local paths open as local files through the same code.
"""
import io
import warnings

from ._aquifer import File

_BUFFER = 8 << 20


class _Raw(io.RawIOBase):
    """The unbuffered file: a position over File's positional calls."""

    def __init__(self, path, mode, credentials, profile):
        super().__init__()
        self._file = File(path, "r" if mode == "r" else "w", credentials or "", profile or "")
        self._mode = mode
        self._pos = 0
        self.name = path

    @property
    def mode(self):
        return self._mode + "b"

    def readable(self):
        return self._mode == "r"

    def writable(self):
        return self._mode == "w"

    def seekable(self):
        return True

    def readinto(self, b):
        self._checkClosed()
        if self._mode != "r":
            raise io.UnsupportedOperation("not readable")
        n = self._file.readinto(self._pos, memoryview(b).cast("B"))
        self._pos += n
        return n

    def write(self, b):
        self._checkClosed()
        if self._mode != "w":
            raise io.UnsupportedOperation("not writable")
        view = memoryview(b).cast("B")
        self._file.write_at(self._pos, view)
        self._pos += len(view)
        return len(view)

    def seek(self, offset, whence=io.SEEK_SET):
        self._checkClosed()
        if whence == io.SEEK_SET:
            pos = offset
        elif whence == io.SEEK_CUR:
            pos = self._pos + offset
        elif whence == io.SEEK_END:
            pos = self._file.size + offset
        else:
            raise ValueError(f"invalid whence ({whence})")
        if pos < 0:
            raise OSError(22, f"negative seek position {pos}")
        self._pos = pos
        return pos

    def tell(self):
        self._checkClosed()
        return self._pos

    def truncate(self, size=None):
        self._checkClosed()
        if self._mode != "w":
            raise io.UnsupportedOperation("not writable")
        size = self._pos if size is None else size
        self._file.truncate(size)
        return size

    def close(self):
        if self.closed:
            return
        try:
            self._file.close()  # stores a written file; raises if it was not stored
        finally:
            super().close()

    def abort(self):
        """Drops a file being written: nothing is stored."""
        if not self.closed:
            self._file.abort()
            super().close()

    def __del__(self):
        _dropped(self, self)


def _dropped(f, raw):
    """A writer collected without close(): dropped, with a ResourceWarning,
    never stored half-written."""
    if getattr(raw, "_mode", None) == "w" and not raw.closed:
        warnings.warn(f"aquifer.open({raw.name!r}): dropped without close(); nothing was stored", ResourceWarning,
                      stacklevel=2)
        raw.abort()


class _DropOnError:
    """A `with` block left by an exception drops the file (nothing stored)
    rather than storing what was written before the exception; so does a
    file collected without close()."""

    def _raw(self):
        return self.raw if isinstance(self, io.BufferedWriter) else self.buffer.raw

    def __exit__(self, kind, value, tb):
        if kind is not None and not self.closed:
            self.abort()
        else:
            self.close()
        return False

    def abort(self):
        """Drops the file: nothing is stored."""
        self._raw().abort()

    def __del__(self):
        _dropped(self, self._raw())


class BufferedWriter(_DropOnError, io.BufferedWriter):
    pass


class TextWriter(_DropOnError, io.TextIOWrapper):
    pass


def open(path, mode="rb", *, buffering=-1, encoding=None, errors=None, newline=None, credentials=None,
         profile=None):
    """Opens aquifer://HOST:PORT/BUCKET/KEY (or a local path) for reading
    ("rb", "r") or writing ("wb", "w": the file is stored whole at close).

    credentials/profile choose the keys as the CLI's --credentials/--profile
    do (default: AWS_* variables, ~/.aws/credentials, then aquifer's own).
    Raises FileNotFoundError, PermissionError, ConnectionError (the store
    could not be reached within AQUIFER_RETRY_DEADLINE) or OSError."""
    kinds = set(mode)
    if not kinds <= set("rwbt") or len(mode) != len(kinds) or ("r" in kinds) == ("w" in kinds) or \
            ("b" in kinds and "t" in kinds):
        raise ValueError(f"mode must be one of rb, wb, r, w (not '{mode}'): the store's files are read or "
                         "written whole, not appended or updated in place")
    kind = "r" if "r" in kinds else "w"
    raw = _Raw(path, kind, credentials, profile)
    size = _BUFFER if buffering in (-1, None) or buffering > 1 else 0
    if size == 0:
        if "b" not in kinds:
            raise ValueError("text files must be buffered")
        return raw
    if kind == "r":
        f = io.BufferedReader(raw, size)
        return f if "b" in kinds else io.TextIOWrapper(f, encoding=encoding, errors=errors, newline=newline)
    f = BufferedWriter(raw, size)
    return f if "b" in kinds else TextWriter(f, encoding=encoding, errors=errors, newline=newline)
