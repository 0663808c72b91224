"""Receiving an upload without ever holding more than the limit.

Django does not limit the size of uploaded files (DATA_UPLOAD_MAX_MEMORY_SIZE covers form fields
and raw bodies read through `request.body`). `LimitedUploadHandler` goes first among a request's
upload handlers: it stops a multipart upload as soon as a file passes the limit (or at once when
Content-Length says it will), consuming the rest of the body without keeping it, so the client
still gets our response rather than a reset connection. Raw bodies are read with `read_body`,
which checks Content-Length before reading and never reads more than limit + 1 bytes.

A view must install the handler before anything reads `request.POST`; CsrfViewMiddleware does
so for CSRF-protected views, hence the upload page's csrf_exempt + csrf_protect pair (Django's
documented pattern for custom upload handlers).
"""
from __future__ import annotations

from django.core.files.uploadhandler import FileUploadHandler, StopUpload

# Room for the multipart boundaries and the form's other fields in Content-Length.
MULTIPART_SLACK = 64 * 1024


class LimitedUploadHandler(FileUploadHandler):
    def __init__(self, request=None, *, limit: int) -> None:
        super().__init__(request)
        self.limit = limit
        self.exceeded = False
        self.content_length: int | None = None

    def handle_raw_input(self, input_data, META, content_length, boundary, encoding=None):
        self.content_length = content_length
        if content_length is not None and content_length > self.limit + MULTIPART_SLACK:
            self.exceeded = True
        # Returning nothing lets the other handlers parse the body.

    def new_file(self, *args, **kwargs):
        super().new_file(*args, **kwargs)
        if self.exceeded:
            raise StopUpload(connection_reset=False)

    def receive_data_chunk(self, raw_data, start):
        if start + len(raw_data) > self.limit:
            self.exceeded = True
            raise StopUpload(connection_reset=False)
        return raw_data  # the next handler (memory or temporary file) keeps it

    def file_complete(self, file_size):
        return None


def install(request, *, limit: int) -> LimitedUploadHandler:
    handler = LimitedUploadHandler(request, limit=limit)
    request.upload_handlers.insert(0, handler)
    return handler


def read_uploaded(upload, *, limit: int) -> bytes | None:
    """The uploaded file's bytes, or None when it is over `limit` after all."""
    upload.seek(0)
    data = upload.read(limit + 1)
    return None if len(data) > limit else data


LENGTH_REQUIRED = 411


def chunked_body_problem(request) -> str | None:
    """Why a body sent with a Transfer-Encoding (chunked: no Content-Length) is refused, or None.

    Django reads a request body only as far as Content-Length says, so under gunicorn or runserver
    a chunked upload reads as empty ("the file is empty"). Reading the raw WSGI stream instead
    would go around Django's multipart parser and its limits; the upload views answer 411 Length
    Required with this message before anything reads the body.
    """
    encoding = request.META.get("HTTP_TRANSFER_ENCODING", "")
    if not encoding:
        return None
    return (
        f"The upload was sent with 'Transfer-Encoding: {encoding}' and no Content-Length, which this server "
        "does not read; nothing was stored. Send the file with a Content-Length header (curl --data-binary @file "
        "or -F file=@file do; a piped or streamed body does not)."
    )


class BodyTooLarge(Exception):
    def __init__(self, size: int | None) -> None:
        super().__init__(size)
        self.size = size


def read_body(request, *, limit: int) -> bytes:
    """A raw request body of at most `limit` bytes; raises BodyTooLarge otherwise (before reading
    anything when Content-Length already says so)."""
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    if declared > limit:
        raise BodyTooLarge(declared)
    data = request.read(limit + 1)
    if len(data) > limit:
        raise BodyTooLarge(None)
    return data
