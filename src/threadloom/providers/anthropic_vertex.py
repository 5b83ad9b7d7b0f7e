"""Claude on Google Vertex AI (spec 05 §5.12.3): the Anthropic adapter with the SDK's own
``anthropic.AsyncAnthropicVertex`` client.

Everything but the client is :class:`~threadloom.providers.anthropic.AnthropicProvider`'s,
the native compaction (spec 23 §23.2 rule 7) included: the SDK's Vertex client counts
tokens (``count-tokens:rawPredict``) and sends the compaction beta as a header.
The SDK client sends the Messages body to ``POST /v1/projects/{project}/locations/
{region}/publishers/anthropic/models/{model}:streamRawPredict`` (the model moves to the
path, ``anthropic_version`` becomes ``vertex-2023-10-16``) with a Google OAuth access
token; the answer is the Messages API's own event stream. ``Model.model`` is the Vertex
model id (``claude-sonnet-4@20250514``).

Settings as the SDK defines them: the region from ``region`` or ``CLOUD_ML_REGION``, the
project from ``project_id`` or ``ANTHROPIC_VERTEX_PROJECT_ID`` (required), the token from
``access_token``, a ``google.auth`` ``credentials`` object, or Application Default
Credentials (``GOOGLE_APPLICATION_CREDENTIALS``, gcloud's login, the metadata server)
through ``google-auth``, refreshed when it expires.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

import anthropic

from threadloom.errors import ProviderError
from threadloom.providers.anthropic import TIMEOUT, AnthropicProvider, map_error
from threadloom.providers.errormap import missing_setting

REGION_ENV = "CLOUD_ML_REGION"
PROJECT_ENV = "ANTHROPIC_VERTEX_PROJECT_ID"


class AnthropicVertexProvider(AnthropicProvider):
    """The Anthropic adapter on Vertex AI (spec 05 §5.12.3).

    ``base_url`` defaults to ``ANTHROPIC_VERTEX_BASE_URL``, else the region's endpoint
    (``https://<region>-aiplatform.googleapis.com/v1``; ``global``, ``us`` and ``eu`` have
    their own hosts). ``google-auth`` (the ``vertex`` extra) is needed unless an
    ``access_token`` is given.
    """

    def __init__(
        self,
        name: str = "anthropic-vertex",
        *,
        region: str | None = None,
        project_id: str | None = None,
        access_token: str | None = None,
        credentials: Any = None,
        base_url: str | None = None,
        default_max_tokens: int = 8192,
    ) -> None:
        if access_token is None and credentials is None:
            try:
                importlib.import_module("google.auth")
            except ImportError as exc:
                raise ImportError(
                    "google-auth is not installed (pip install 'threadloom[vertex]')"
                ) from exc
        super().__init__(name=name, base_url=base_url, default_max_tokens=default_max_tokens)
        self.region = region
        self.project_id = project_id
        self.access_token = access_token
        self.credentials = credentials

    def missing_credential(self) -> str | None:
        """``CLOUD_ML_REGION`` without a region, ``ANTHROPIC_VERTEX_PROJECT_ID`` without a
        project (the SDK builds the URL before it loads credentials, so a project named
        only by the credentials is not used for the first request). Whether Application
        Default Credentials exist is learnt at the first request: the metadata server of
        a Google Cloud machine may hold them."""
        if self._client is not None:
            return None
        if not (self.region or os.environ.get(REGION_ENV)):
            return REGION_ENV
        if not (self.project_id or os.environ.get(PROJECT_ENV)):
            return PROJECT_ENV
        return None

    def new_client(self) -> anthropic.AsyncAnthropicVertex:
        """``AsyncAnthropicVertex`` with retries off; ``authentication`` when the region or
        the project is missing."""
        variable = self.missing_credential()
        if variable:
            raise missing_setting(variable, self.name)
        region = self.region or os.environ[REGION_ENV]
        return anthropic.AsyncAnthropicVertex(
            region=region,
            project_id=self.project_id or os.environ[PROJECT_ENV],
            access_token=self.access_token,
            credentials=self.credentials,
            base_url=self.base_url,
            max_retries=0,
            timeout=TIMEOUT,
        )

    def map_error(self, exc: BaseException) -> ProviderError:
        """As the Anthropic adapter maps errors; a Google credential that cannot be found
        or refreshed is ``authentication`` (not retryable) in one line, except when the
        token endpoint could not be reached (``connection``, retryable)."""
        if type(exc).__module__.startswith("google.auth"):
            text = str(exc).strip()
            first = text.splitlines()[0] if text else type(exc).__name__
            if type(exc).__name__ == "TransportError":
                return ProviderError(
                    f"Google token endpoint: {first}", code="connection", provider=self.name
                )
            return ProviderError(
                f"Google credentials: {first}",
                code="authentication",
                retryable=False,
                provider=self.name,
            )
        return map_error(exc, self.name)


__all__ = ["PROJECT_ENV", "REGION_ENV", "AnthropicVertexProvider"]
