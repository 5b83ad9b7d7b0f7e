"""Thread files over HTTP (spec 08 §8.8): listing, stats, search, file bytes, writes, moves
and deletes, each one ThreadState file method (spec 07 §7.5).

``{path}`` is percent-decoded exactly once: the ASGI server decodes the URL path into the
scope's ``path`` and nothing here decodes again. It is then normalised by spec 07 §7.2
before any store call, so a ``.``/``..`` segment, a control character, a backslash or a
NUL is a 400 that never reaches the store; and every store query is scoped to the thread
the caller was allowed to see (``deps.thread_row``), so no path can name another thread's
files. File exceptions become answers through ``errors.from_threadloom`` (§8.8's table).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Literal, cast

from fastapi import Depends, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.convertors import PathConvertor, register_url_convertor
from starlette.datastructures import UploadFile

from threadloom.errors import FileError, InvalidPath
from threadloom.records import AttachmentRef, FileChunk, FileRecord, name_of
from threadloom.server import deps
from threadloom.server.deps import Query
from threadloom.server.errors import ApiError, bad_field, invalid, not_found
from threadloom.server.file_headers import USER_CONTENT_HEADERS, content_disposition
from threadloom.server.routing import Router
from threadloom.store.base import ThreadRow
from threadloom.thread.files import file_limits
from threadloom.thread.filetypes import (
    extension_of,
    mime_from_name,
    normalize_path,
    sniff_mime,
)
from threadloom.thread.state import ThreadState
from threadloom.wire.files import FILES_LIMIT, FileData, MoveFile, RenameFile
from threadloom.wire.patterns import is_mime_type, valid_mime


class FilePathConvertor(PathConvertor):
    """Starlette's ``path`` with line breaks too (its ``.*`` stops at ``\n``), so a path with
    a control character reaches the route and gets spec 07's 400, not a route-miss 404."""

    regex = r"[\s\S]*"


register_url_convertor("fspath", FilePathConvertor())
FS_PATH = "/{path:fspath}"

router = Router(prefix="/api/threads/{id}/fs", tags=["files"])

CHUNK_SIZE = 1_048_576
OCTET_STREAM = "application/octet-stream"
_RETRIES = 3


# -- request parts -------------------------------------------------------------------------


def thread_path(raw: str, field: str = "path") -> str:
    """``raw`` normalised by spec 07 §7.2; a refused path is a 400 with spec 07's message."""
    try:
        return normalize_path(raw)
    except InvalidPath as exc:
        raise bad_field(field, "is not a valid path", str(exc)) from None


def flag(q: Query, name: str) -> bool:
    """A flag parameter: present without a value (``?stats``) is true, else §8.1.5's
    boolean rules (``?stats=false`` is false, ``?stats=maybe`` a 400)."""
    if not q.has(name):
        return False
    if q.raw(name) == "":
        return True
    return bool(q.bool(name))


def limit(q: Query) -> int:
    value = q.int("limit", 100)
    if value is None or not 1 <= value <= FILES_LIMIT:
        raise bad_field("limit", f"must be an integer from 1 to {FILES_LIMIT}")
    return value


async def thread_state(request: Request, row: ThreadRow) -> ThreadState:
    return deps.state_of(request, row)


# -- answers -------------------------------------------------------------------------------


def ref_wire(record: FileRecord) -> dict[str, Any]:
    """The AttachmentRef the file routes answer with: ``id`` is the path (§8.8)."""
    return AttachmentRef(
        id=record.path,
        type="file",
        path=record.path,
        name=record.name,
        mimeType=record.mime_type,
        size=record.size,
        width=record.width,
        height=record.height,
    ).to_wire()


def listing(path: str, entries: list[FileRecord]) -> dict[str, Any]:
    return {"files": [e.to_wire() for e in entries], "path": path}


def link_wire(record: FileRecord) -> dict[str, Any]:
    return {"file": record.to_wire(), "external": True, "location": record.location}


def header_mime(mime: str) -> str:
    """The stored MIME type as a ``Content-Type`` value; one that could not be a header
    is sent as octet-stream (files written from code may carry any string)."""
    return mime if valid_mime(mime) else OCTET_STREAM


async def _close(stream: AsyncIterator[FileChunk]) -> None:
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        await aclose()


async def _body(
    first: FileChunk, rest: AsyncIterator[FileChunk], size: int, path: str
) -> AsyncIterator[bytes]:
    sent = len(first.data)
    yield first.data
    async for chunk in rest:
        sent += len(chunk.data)
        if sent > size:  # a rewrite slipped in: never send more than Content-Length says
            raise FileError(f"File changed while reading: {path}")
        yield chunk.data


async def path_answer(state: ThreadState, path: str) -> Response | dict[str, Any]:
    """GET of a path: file bytes, a link, or a directory listing (§8.8).

    The first chunk is read before the answer starts, so a missing file is still a 404
    and ``Content-Length`` matches the version being sent; a file rewritten between the
    stat and the read is looked at again. A rewrite while later chunks are sent ends the
    stream early (the connection closes short of ``Content-Length``)."""
    for _ in range(_RETRIES):
        record = await state.stat_file(path)
        if record is None:
            raise not_found()
        if record.is_directory:
            return listing(path, (await state.readdir_file(path)).entries)
        if record.storage == "url":
            return link_wire(record)
        stream = await state.read_file_stream(path, chunk_size=CHUNK_SIZE)
        if stream is None:
            continue
        try:
            first = await anext(stream)
        except (FileError, StopAsyncIteration):
            await _close(stream)
            continue
        expected = max(1, -(-record.size // CHUNK_SIZE))
        if first.total_chunks != expected or (first.is_last and len(first.data) != record.size):
            await _close(stream)
            continue
        mime = header_mime(record.mime_type)
        headers = {
            "Content-Type": mime,
            "Content-Length": str(record.size),
            "Content-Disposition": content_disposition(record.name, mime),
            **USER_CONTENT_HEADERS,  # nosniff: set on every answer by the pipeline
        }
        return StreamingResponse(_body(first, stream, record.size, path), headers=headers)
    raise ApiError(409, "conflict", f"File changed while reading: {path}")


# -- GET /fs -------------------------------------------------------------------------------


@router.get("", summary="List the root directory, or file statistics, grep or find")
async def list_files(
    request: Request, row: ThreadRow = Depends(deps.thread_row), q: Query = Depends(deps.query)
) -> dict[str, Any]:
    # every parameter read whatever the branch: a bad value is a 400 even where unused
    count = limit(q)
    kind = q.enum("type", ("file", "directory", "all"), "all")
    for name, what in (("grep", "Search query"), ("find", "Pattern")):
        if q.raw(name) == "":
            raise bad_field(name, "must not be empty", f"{what} must not be empty")
    below = q.raw("path")
    scope = thread_path(below) if below else None
    if flag(q, "stats"):
        state = await thread_state(request, row)
        return (await state.get_file_stats(scope or "/")).to_wire()
    if q.has("grep"):
        query = q.raw("grep") or ""
        state = await thread_state(request, row)
        hits = await state.grep_files(query, path=scope, limit=count)
        return {"results": [h.to_wire() for h in hits], "pattern": query}
    if q.has("find"):
        pattern = q.raw("find") or ""
        state = await thread_state(request, row)
        found = await state.find_files(
            pattern, type=cast(Literal["file", "directory", "all"], kind), limit=count
        )
        return {"files": [f.to_wire() for f in found], "pattern": pattern}
    state = await thread_state(request, row)
    return listing("/", (await state.readdir_file("/")).entries)


# -- GET /fs/{path} ------------------------------------------------------------------------


@router.get(
    FS_PATH,
    response_model=None,
    summary="A file's bytes, a directory listing, a link, a record or a thumbnail",
)
async def read_path(
    path: str,
    request: Request,
    row: ThreadRow = Depends(deps.thread_row),
    q: Query = Depends(deps.query),
) -> Response | dict[str, Any]:
    target = thread_path(path)
    thumbnail = flag(q, "thumbnail")
    as_json = q.enum("format", ("json",)) == "json"
    state = await thread_state(request, row)
    if thumbnail:
        data = await state.get_file_thumbnail(target)
        if data is None:
            raise not_found("Thumbnail not found")
        return Response(
            data,
            headers={
                "Content-Type": "image/jpeg",
                "Cache-Control": "private, max-age=31536000",
                **USER_CONTENT_HEADERS,
            },
        )
    if as_json:
        record = await state.stat_file(target)
        if record is None:
            raise not_found()
        return {"file": record.to_wire()}
    return await path_answer(state, target)


# -- POST /fs/{path} -----------------------------------------------------------------------


def _is_raw(content_type: str | None) -> bool:
    """A raw upload: any type but JSON, or none at all (§8.8: the MIME type is then
    inferred from the name)."""
    return content_type is None or not content_type.strip() or not deps.is_json_type(content_type)


MULTIPART_OVERHEAD = 64 * 1024
"""What a multipart form may hold beyond its file: boundaries, part headers, small fields."""


async def _form_file(request: Request, limit: int) -> tuple[bytes, str | None, str | None]:
    """The one file of a ``multipart/form-data`` body (any field name, ``file`` in
    ``curl -F file=@notes.txt``): its bytes, its part's content type and its file name."""
    body = await deps.read_body(request, limit + MULTIPART_OVERHEAD)

    async def replay() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    problem = "must be a multipart form with one file, as curl -F file=@notes.txt sends"
    try:
        form = await Request(request.scope, replay).form(max_files=1, max_fields=16)
    except Exception:  # python-multipart's parse errors, Starlette's limits
        raise bad_field("body", problem) from None
    try:
        files = [value for _, value in form.multi_items() if isinstance(value, UploadFile)]
        if len(files) != 1:
            raise bad_field("body", problem)
        upload = files[0]
        data = await upload.read()
        if len(data) > limit:
            raise deps.too_large(limit)
        return data, upload.content_type, upload.filename
    finally:
        await form.close()


async def _multipart_upload(request: Request, state: ThreadState, target: str) -> JSONResponse:
    """A file sent as a form: the file is stored, not the form. Its type is the part's,
    when it names one; else what the bytes announce, else the extension of the path or,
    when the path has none, of the uploaded file's name (spec 08 §8.8)."""
    data, declared, filename = await _form_file(request, file_limits(state.hub).max_file_size)
    media = (declared or "").split(";", 1)[0].strip().lower()
    mime = declared if media and media != OCTET_STREAM and is_mime_type(media) else None
    if mime is None and sniff_mime(data) is None and extension_of(name_of(target)) is None:
        guessed = mime_from_name(filename or "", "")
        mime = guessed or None
    record = await state.write_file(target, data, mime)
    return JSONResponse(ref_wire(record), status_code=201)


async def _raw_upload(request: Request, state: ThreadState, target: str) -> JSONResponse:
    content_type = request.headers.get("content-type") or ""
    media = content_type.split(";", 1)[0].strip()
    if media and not is_mime_type(media):
        raise bad_field("Content-Type", "must be a MIME type such as text/plain")
    if target == "/":
        raise bad_field("path", "is the root directory", "Cannot write to the root directory")
    if media.lower() == "multipart/form-data":
        return await _multipart_upload(request, state, target)
    data = await deps.read_body(request, file_limits(state.hub).max_file_size)
    mime = None if media.lower() in ("", OCTET_STREAM) else media
    record = await state.write_file(target, data, mime)
    return JSONResponse(ref_wire(record), status_code=201)


@router.post(
    FS_PATH,
    status_code=201,
    response_model=None,
    summary="Write a file (JSON base64 or raw body), make a directory, move or rename",
)
async def write_path(
    path: str, request: Request, row: ThreadRow = Depends(deps.thread_row)
) -> JSONResponse:
    target = thread_path(path)
    state = await thread_state(request, row)
    if _is_raw(request.headers.get("content-type")):
        return await _raw_upload(request, state, target)
    body = await deps.json_object(request, deps.context(request).settings.max_upload_bytes)
    action = body.get("action")
    if action == "move":
        destination = deps.parse(MoveFile, body).destination
        record = await state.move_file(target, thread_path(destination, "destination"))
        return JSONResponse(ref_wire(record), status_code=200)
    if action == "rename":
        record = await state.rename_file(target, deps.parse(RenameFile, body).newName)
        return JSONResponse(ref_wire(record), status_code=200)
    if action is None and body.get("type") == "directory":
        record = await state.mkdir_file(target)
        return JSONResponse({"directory": record.to_wire()}, status_code=201)
    if action is None and "data" in body:
        form = deps.parse(FileData, body)
        record = await state.write_file(
            target,
            form.data,
            form.mimeType,
            metadata=form.metadata,
            width=form.width,
            height=form.height,
            thumbnail=form.thumbnail,
        )
        return JSONResponse(ref_wire(record), status_code=201)
    raise invalid(
        "Invalid request body",
        [("body", "must be a data, directory, move or rename form")],
    )


# -- DELETE /fs/{path} ---------------------------------------------------------------------


@router.delete(FS_PATH, status_code=204, summary="Delete a file, link or directory")
async def delete_path(
    path: str,
    request: Request,
    row: ThreadRow = Depends(deps.thread_row),
    q: Query = Depends(deps.query),
) -> Response:
    target = thread_path(path)
    recursive = bool(q.bool("recursive", False))
    state = await thread_state(request, row)
    record = await state.stat_file(target)
    if record is None:
        raise not_found()
    if record.is_directory:
        await state.rmdir_file(target, recursive=recursive)
    else:
        await state.unlink_file(target)
    return Response(status_code=204)
