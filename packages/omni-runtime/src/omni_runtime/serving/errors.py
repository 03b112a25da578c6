"""OpenAI-shaped errors: ``{"error": {"message", "type", "param", "code"}}``.

Official OpenAI clients parse this envelope into typed exceptions
(``BadRequestError``, ``NotFoundError``...), so every failure the server
reports, including FastAPI's own 404/405 and malformed JSON, goes through it.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException


class APIError(Exception):
    """An error the client should see, with its HTTP status and envelope fields."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ):
        super().__init__(message)
        self.headers = headers
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code
        self.headers = headers

    def body(self) -> dict[str, Any]:
        return error_body(self.message, type=self.type, param=self.param, code=self.code)

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers)


def error_body(message: str, *, type: str, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


RETRY_AFTER_S = "1"
"""Seconds a client should wait before retrying a 503 or 429 (``Retry-After``)."""


def runtime_error(exc: Exception) -> APIError:
    """The HTTP answer to a request the runtime could not complete (``RequestFailed.kind`` decides).

    ``process_died``, ``shutdown`` and ``unavailable`` are retryable (503 with
    ``Retry-After``: another replica, the restarted process or another server
    will take it); ``overloaded`` is 429 at once; ``deadline`` is 504;
    ``invalid_request`` (the request breaks what the model declared) is 400
    naming the field; a stage's own error is 500.
    """
    kind = getattr(exc, "kind", "stage_error")
    if kind == "invalid_request":  # the model's verdict (or the parent's, from the limits the model declared)
        return APIError(400, str(exc), param=getattr(exc, "param", None), code="invalid_value")
    if kind == "overloaded":
        return APIError(429, str(exc), type="rate_limit_error", code="overloaded", headers={"Retry-After": RETRY_AFTER_S})
    if kind in ("process_died", "shutdown", "unavailable"):
        return APIError(503, str(exc), type="server_error", code=kind, headers={"Retry-After": RETRY_AFTER_S})
    if kind == "deadline":
        return APIError(504, str(exc), type="server_error", code="deadline_exceeded")
    return APIError(500, str(exc), type="server_error", code=kind)


def bad_request(message: str, *, param: str | None = None, code: str | None = None) -> APIError:
    return APIError(400, message, param=param, code=code)


_HTTP_TYPES = {401: "authentication_error", 404: "not_found_error", 405: "invalid_request_error", 413: "invalid_request_error"}


def install_handlers(app: FastAPI) -> None:
    """Route every error path of the app through the envelope."""

    @app.exception_handler(APIError)
    async def _api_error(_: Request, exc: APIError) -> JSONResponse:
        return exc.response()

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = _HTTP_TYPES.get(exc.status_code, "invalid_request_error" if exc.status_code < 500 else "server_error")
        return JSONResponse(
            error_body(str(exc.detail), type=kind, code=None),
            status_code=exc.status_code,
            headers=getattr(exc, "headers", None),
        )

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        param = ".".join(str(p) for p in first.get("loc", ())[1:]) or None
        return JSONResponse(
            error_body(first.get("msg", "invalid request"), type="invalid_request_error", param=param, code="invalid_value"),
            status_code=400,
        )

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
        return JSONResponse(
            error_body(f"internal error: {type(exc).__name__}: {exc}", type="server_error", code="internal_error"),
            status_code=500,
        )
