"""Threadloom's Python client (spec 11): HTTP client (async and sync), errors, the chat model.

The client talks HTTP/WebSocket only; of the server side it imports ``threadloom.records`` (the
wire shapes) and ``threadloom.errors`` (its errors derive from ``threadloom.ThreadloomError``,
the base of every Threadloom error), nothing else, so it can be used against a remote server.
"""

from threadloom.client import chat
from threadloom.client.calls import AUTO, UNSET, Upload
from threadloom.client.errors import (
    APIError,
    ApprovalConflictError,
    ApprovalNotFoundError,
    AuthenticationError,
    BadRequestError,
    ConflictError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitError,
    ServerError,
    StreamClosed,
    ThreadDeletedError,
    ThreadloomError,
    ThreadTerminatedError,
    TransportError,
)
from threadloom.client.http import AsyncClient, Client
from threadloom.client.session import ThreadSession
from threadloom.client.session_sync import SyncThreadSession

__all__ = [
    "AUTO",
    "UNSET",
    "APIError",
    "ApprovalConflictError",
    "ApprovalNotFoundError",
    "AsyncClient",
    "AuthenticationError",
    "BadRequestError",
    "Client",
    "ConflictError",
    "NotFoundError",
    "PermissionDeniedError",
    "RateLimitError",
    "ServerError",
    "StreamClosed",
    "SyncThreadSession",
    "ThreadDeletedError",
    "ThreadSession",
    "ThreadTerminatedError",
    "ThreadloomError",
    "TransportError",
    "Upload",
    "chat",
]
