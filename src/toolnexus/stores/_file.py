"""`FileStore` (`open_store("file:DIR")`): runs as files in one directory, safe across processes.

Layout under DIR: `store.json` (schema version), `runs/<run>/run.json` (the run's row: handle
records, the tool-call journal, lease), `runs/<run>/conv/<conversation>.jsonl` (append-only
transcripts, one JSON message per line), `runs/<run>/trace.jsonl`, `requests/<id>` (the answer
ledger), `records/<namespace>/<key>.json`, and `quarantine/` (files of quarantined runs that could
not be read, moved there unchanged: see `store.quarantine`). Each file is read on its own: one
that cannot be read is reported as damaged (naming its run and request), never a failure of the
others.

Atomicity without a database: one store-wide `flock` serialises writers across processes, and a
commit first writes its whole effect to `redo.json` (the library's atomic write, `toolnexus._fs`:
staging file, fsync, rename, fsync the folder), then applies it, then removes it. Whoever takes
the lock next finds an unfinished `redo.json` and applies it again — every step is idempotent
(appends start at recorded byte offsets, files are replaced whole) — so a crash at any point
leaves either the old state or the new one. Its files are owner-only (`0o600`).

Blocking file I/O runs on one worker thread per store, never on the event loop. Good for a few
processes on one machine; for many workers use SQLite or PostgreSQL.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import json
import os
import re
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Callable, Optional, TypeVar

from .._fs import fsync_dir, write_atomic
from ..durable import DamagedRow, RunDamaged, StoreUnavailable, StoreVersionError
from ..durable._model import SCHEMA_VERSION, PendingRow, decoded, dumps
from ..errors import ToolnexusTypeError
from ._doc_check import CheckedDocumentStore
from ._document import TRACE_KEEP, Edits, RunDoc

T = TypeVar("T")
_TRACE = "\x00trace"  # the trace's entry in a run's byte-size map


def _name(value: str) -> str:
    """A file name for an id: readable when short and plain, a digest otherwise."""
    from urllib.parse import quote

    quoted = quote(value, safe="-_.", errors="surrogatepass")
    if quoted.startswith(".") or len(quoted) > 150:
        return "h-" + hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()
    return quoted


def _unname(name: str) -> str:
    """The id a file name was made from (a digest name stays as it is)."""
    from urllib.parse import unquote

    return name if name.startswith("h-") else unquote(name, errors="surrogatepass")


_RUN_ID = re.compile(r'"run_id":\s*("(?:[^"\\]|\\.)*")')


def _run_id_in(raw: str) -> Optional[str]:
    """The run id a damaged ledger file names, if the part that is left still says it."""
    found = _RUN_ID.search(raw)
    if found is None:
        return None
    try:
        value = json.loads(found.group(1))
    except ValueError:
        return None
    return value if isinstance(value, str) else None


def _read_text(path: str) -> str:
    """A file's text; bytes that are not UTF-8 kept as lone surrogates (so the JSON reader says what is wrong)."""
    with open(path, "rb") as fh:
        return fh.read().decode("utf-8", "surrogateescape")


def _write_atomic(path: str, text: str) -> None:
    """Replace `path` with `text`: owner-only staging file in the same folder, fsync, rename, fsync folder."""
    write_atomic(path, text, mode=0o600)


def _read_lines(path: str, limit: Optional[int] = None) -> list[str]:
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        return []
    lines = data.decode("utf-8", "surrogateescape").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines[-limit:] if limit is not None else lines


def _offset_of_line(path: str, index: int) -> int:
    """Byte offset where line `index` starts (the file's size if it has fewer lines)."""
    offset = 0
    with open(path, "rb") as fh:
        for n, line in enumerate(fh):
            if n == index:
                return offset
            offset += len(line)
    return offset


def _append_at(path: str, offset: int, lines: list[str]) -> int:
    """Cut `path` to `offset` bytes, append `lines`, fsync; the new size."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.ftruncate(fd, offset)
        os.lseek(fd, offset, os.SEEK_SET)
        data = "".join(line + "\n" for line in lines).encode("utf-8")
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
        return offset + len(data)
    finally:
        os.close(fd)


class FileStore(CheckedDocumentStore):
    """Runs and the answer ledger as files under one directory."""

    def __init__(self, directory: str) -> None:
        super().__init__()
        self.directory = os.path.abspath(directory)
        self.url = f"file:{self.directory}"
        self._pool: Optional[ThreadPoolExecutor] = None
        self._alock: Optional[asyncio.Lock] = None
        self._lock_fd: Optional[int] = None
        self._opened = False

    # -- plumbing ----------------------------------------------------------------------------------

    async def _io(self, fn: Callable[..., T], *args: Any) -> T:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="toolnexus-filestore")
        try:
            return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)
        except OSError as exc:
            raise StoreUnavailable(f"toolnexus: the file store {self.directory} failed: {exc} — check that the "
                                   "directory exists, is writable and has free space") from exc

    def _path(self, *parts: str) -> str:
        return os.path.join(self.directory, *parts)

    async def open(self) -> None:
        if not self._opened:
            await self._io(self._open_sync)
            self._opened = True

    def _open_sync(self) -> None:
        os.makedirs(self._path("runs"), exist_ok=True)
        os.makedirs(self._path("requests"), exist_ok=True)
        meta = self._path("store.json")
        try:
            with open(meta, encoding="utf-8") as fh:
                found = json.load(fh)
        except FileNotFoundError:
            _write_atomic(meta, json.dumps({"format": "toolnexus-run-store", "schema": SCHEMA_VERSION}))
            return
        except ValueError as exc:
            raise StoreVersionError(f"toolnexus: {meta} is not a toolnexus store file ({exc})") from None
        schema = found.get("schema") if isinstance(found, dict) else None
        if not isinstance(schema, int) or schema > SCHEMA_VERSION:
            raise StoreVersionError(
                f"toolnexus: the file store {self.directory} has schema {schema!r}, written by a newer toolnexus "
                f"(this version reads schema {SCHEMA_VERSION}) — upgrade toolnexus or use another directory")

    async def aclose(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await asyncio.get_running_loop().run_in_executor(pool, _nothing)  # one thread, in order: all done
            # Its thread is idle now and exits at once: nothing here waits for the loop's default
            # executor, which tools may be keeping busy.
            pool.shutdown(wait=False)
        self._opened = False

    @asynccontextmanager
    async def _locked(self) -> AsyncIterator[None]:
        if self._alock is None:
            self._alock = asyncio.Lock()
        async with self._alock:
            await self._io(self._lock_sync)
            try:
                await self._io(self._redo_sync)
                yield
            finally:
                await self._io(self._unlock_sync)

    def _lock_sync(self) -> None:
        fd = os.open(self._path(".lock"), os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        self._lock_fd = fd

    def _unlock_sync(self) -> None:
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    # -- the redo log ------------------------------------------------------------------------------

    def _redo_sync(self) -> None:
        path = self._path("redo.json")
        try:
            redo = decoded(_read_text(path), None, "redo log", shape=dict)
        except FileNotFoundError:
            return
        except RunDamaged:  # torn before its rename completed cannot happen; a corrupt file is dropped
            os.unlink(path)
            return
        self._apply_redo(redo)

    def _apply_redo(self, redo: dict[str, Any]) -> None:
        run_dir = redo.get("run_dir")
        if run_dir:
            base = self._path("runs", run_dir)
            os.makedirs(os.path.join(base, "conv"), exist_ok=True)
            for conv_file, (offset, lines) in (redo.get("appends") or {}).items():
                target = (
                    os.path.join(base, "trace.jsonl") if conv_file == _TRACE else os.path.join(base, "conv", conv_file)
                )
                _append_at(target, offset, lines)
            _write_atomic(os.path.join(base, "run.json"), dumps(redo["row"]))
        for name, row in (redo.get("rows") or {}).items():
            _write_atomic(self._path("requests", name), dumps(row))
        os.unlink(self._path("redo.json"))
        fsync_dir(self.directory)

    # -- primitives --------------------------------------------------------------------------------

    def _row_sync(self, run_id: str) -> Optional[dict[str, Any]]:
        try:
            text = _read_text(self._path("runs", _name(run_id), "run.json"))
        except FileNotFoundError:
            return None
        record: Optional[dict[str, Any]] = decoded(text, run_id, "run record", store=self.url, shape=dict)
        return record

    async def _read(self, run_id: str, *, messages: bool) -> Optional[RunDoc]:
        return await self._io(self._read_sync, run_id, messages)

    def _read_sync(self, run_id: str, messages: bool) -> Optional[RunDoc]:
        row = self._row_sync(run_id)
        if row is None:
            return None
        try:
            doc = RunDoc.from_row(row["doc"])
            doc.sizes = dict(row.get("sizes") or {})
        except (KeyError, TypeError, ValueError) as exc:
            raise RunDamaged(run_id, "run record", f"not a run record ({type(exc).__name__}: {exc})",
                             store=self.url) from None
        if messages:
            base = self._path("runs", _name(run_id))
            doc.conversations = {conv: _read_lines(os.path.join(base, "conv", _name(conv)))[:count]
                                 for conv, count in doc.counts.items()}
            doc.trace = _read_lines(os.path.join(base, "trace.jsonl"), TRACE_KEEP)
        return doc

    async def _write(self, doc: RunDoc, edits: Edits, trace: list[str], rows: list[PendingRow]) -> None:
        await self._io(self._write_sync, doc, edits, trace, rows)

    def _write_sync(self, doc: RunDoc, edits: Edits, trace: list[str], rows: list[PendingRow]) -> None:
        run_dir = _name(doc.run_id)
        base = self._path("runs", run_dir)
        sizes = dict(doc.sizes)
        appends: dict[str, tuple[int, list[str]]] = {}
        for conv, (start, lines, before) in edits.items():
            name = _name(conv)
            path = os.path.join(base, "conv", name)
            if start >= before:
                offset = sizes.get(conv, 0)
            else:  # a rewind: find where line `start` begins (lines before it are committed bytes)
                offset = _offset_of_line(path, start) if os.path.exists(path) else 0
            appends[name] = (offset, lines)
            sizes[conv] = offset + sum(len(line.encode("utf-8")) + 1 for line in lines)
        if trace:
            offset = sizes.get(_TRACE, 0)
            appends[_TRACE] = (offset, list(trace))
            sizes[_TRACE] = offset + sum(len(line.encode("utf-8")) + 1 for line in trace)
        redo = {"run_dir": run_dir, "appends": appends, "row": {"doc": doc.row(), "sizes": sizes},
                "rows": {_name(r.request_id): r.to_dict() for r in rows}}
        _write_atomic(self._path("redo.json"), dumps(redo))
        self._apply_redo(redo)
        doc.sizes = sizes

    async def _write_rows(self, rows: list[PendingRow]) -> None:
        await self._io(self._write_rows_sync, rows)

    def _write_rows_sync(self, rows: list[PendingRow]) -> None:
        redo = {"rows": {_name(r.request_id): r.to_dict() for r in rows}}
        _write_atomic(self._path("redo.json"), dumps(redo))
        self._apply_redo(redo)

    async def _ledger(self, damaged: Optional[list[RunDamaged]] = None) -> dict[str, PendingRow]:
        return await self._io(self._ledger_sync, damaged)

    def _ledger_sync(self, damaged: Optional[list[RunDamaged]] = None) -> dict[str, PendingRow]:
        out: dict[str, PendingRow] = {}
        folder = self._path("requests")
        for name in os.listdir(folder):
            if name.startswith("."):
                continue
            try:
                row = self._ledger_row(os.path.join(folder, name), _unname(name))
            except FileNotFoundError:
                continue
            except RunDamaged as exc:
                if damaged is None:
                    raise
                damaged.append(exc)
                continue
            out[row.request_id] = row
        return out

    def _ledger_row(self, path: str, request_id: str) -> PendingRow:
        """One ledger file, read on its own (`RunDamaged` naming its run, if it still says, and request)."""
        text = _read_text(path)
        try:
            data = decoded(text, None, "request", request_id=request_id, store=self.url, shape=dict)
            row = PendingRow.from_dict(data)
            if not isinstance(row.request_id, str) or not isinstance(row.request, (dict, type(None))):
                raise ToolnexusTypeError("the ledger row's request_id or request has the wrong type")
            return row
        except RunDamaged as exc:
            raise RunDamaged(_run_id_in(text), exc.part, exc.reason, request_id=request_id, store=self.url) from None
        except (TypeError, ValueError) as exc:
            raise RunDamaged(_run_id_in(text), "request", f"not a ledger row ({exc})", request_id=request_id,
                             store=self.url) from None

    async def _rows_get(self, request_ids: list[str]) -> dict[str, PendingRow]:
        return await self._io(self._rows_get_sync, request_ids)

    def _rows_get_sync(self, request_ids: list[str]) -> dict[str, PendingRow]:
        out: dict[str, PendingRow] = {}
        for request_id in request_ids:
            try:
                out[request_id] = self._ledger_row(self._path("requests", _name(request_id)), request_id)
            except FileNotFoundError:
                aside = self._path("quarantine", "requests", _name(request_id))
                if os.path.exists(aside):  # its run was quarantined with this file unreadable
                    raise RunDamaged(_run_id_in(_read_text(aside)), "request", "", request_id=request_id,
                                     store=self.url, quarantined=True) from None
        return out

    async def _run_ids(self) -> list[str]:
        return await self._io(self._run_ids_sync)

    def _run_ids_sync(self) -> list[str]:
        """Every run whose record can be read (`_unreadable_docs` lists the others)."""
        ids = []
        for name in os.listdir(self._path("runs")):
            try:
                with open(self._path("runs", name, "run.json"), encoding="utf-8") as fh:
                    ids.append(json.load(fh)["doc"]["run_id"])
            except (OSError, ValueError, KeyError, TypeError):
                continue
        return ids

    async def _unreadable_docs(self) -> list[DamagedRow]:
        return await self._io(self._unreadable_sync)

    def _unreadable_sync(self) -> list[DamagedRow]:
        found = []
        for name in sorted(os.listdir(self._path("runs"))):
            try:
                self._read_sync(_unname(name), False)
            except FileNotFoundError:
                continue
            except RunDamaged as exc:
                found.append(DamagedRow.of(exc))
        return found

    async def _set_aside(self, run_id: str, whole_run: bool, request_ids: list[str]) -> list[str]:
        return await self._io(self._set_aside_sync, run_id, whole_run, request_ids)

    def _set_aside_sync(self, run_id: str, whole_run: bool, request_ids: list[str]) -> list[str]:
        """Move a run's unreadable files (its folder, if its record is; those ledger files) under
        `quarantine/`, unchanged; the paths moved, relative to the store."""
        moved = [os.path.join("requests", _name(r)) for r in request_ids]
        if whole_run:
            moved.append(os.path.join("runs", _name(run_id)))
        for rel in moved:
            os.makedirs(os.path.dirname(self._path("quarantine", rel)), exist_ok=True)
            os.replace(self._path(rel), self._path("quarantine", rel))
        fsync_dir(self.directory)
        return moved

    async def _put_back(self, moved: list[str]) -> None:
        await self._io(self._put_back_sync, moved)

    def _put_back_sync(self, moved: list[str]) -> None:
        for rel in moved:
            if os.path.exists(self._path("quarantine", rel)):
                os.replace(self._path("quarantine", rel), self._path(rel))
        fsync_dir(self.directory)

    async def _drop_record(self, namespace: str, key: str) -> None:
        await self._io(self._drop_record_sync, namespace, key)

    def _drop_record_sync(self, namespace: str, key: str) -> None:
        try:
            os.unlink(self._path("records", _name(namespace), _name(key) + ".json"))
        except FileNotFoundError:
            pass

    async def _forget(self, run_id: str, request_ids: list[str]) -> None:
        await self._io(self._forget_sync, run_id, request_ids)

    def _forget_sync(self, run_id: str, request_ids: list[str]) -> None:
        import shutil

        shutil.rmtree(self._path("runs", _name(run_id)), ignore_errors=True)
        for request_id in request_ids:
            try:
                os.unlink(self._path("requests", _name(request_id)))
            except FileNotFoundError:
                pass

    async def _record(self, namespace: str, key: str) -> Optional[str]:
        return await self._io(self._record_sync, namespace, key)

    def _record_sync(self, namespace: str, key: str) -> Optional[str]:
        try:
            return _read_text(self._path("records", _name(namespace), _name(key) + ".json"))
        except FileNotFoundError:
            return None

    async def _put_record(self, namespace: str, key: str, text: str) -> None:
        await self._io(self._put_record_sync, namespace, key, text)

    def _put_record_sync(self, namespace: str, key: str, text: str) -> None:
        folder = self._path("records", _name(namespace))
        os.makedirs(folder, exist_ok=True)
        _write_atomic(os.path.join(folder, _name(key) + ".json"), text)

    async def _records(self, namespace: str) -> list[str]:
        return await self._io(self._records_sync, namespace)

    def _records_sync(self, namespace: str) -> list[str]:
        folder = self._path("records", _name(namespace))
        try:
            names = [n for n in os.listdir(folder) if n.endswith(".json") and not n.startswith(".")]
        except FileNotFoundError:
            return []
        paths = sorted((os.path.join(folder, n) for n in names), key=os.path.getmtime)
        return [_read_text(path) for path in paths]

    def stored_bytes(self, run_id: str) -> int:
        """Bytes this run occupies on disk (for benchmarks)."""
        total = 0
        for folder, _, files in os.walk(self._path("runs", _name(run_id))):
            total += sum(os.path.getsize(os.path.join(folder, f)) for f in files)
        return total


def _nothing() -> None:
    return None
