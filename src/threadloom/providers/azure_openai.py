"""Azure OpenAI (spec 05 §5.12.1): the OpenAI adapters with the SDK's own
``openai.AsyncAzureOpenAI`` client.

Only the client differs; request mapping, stream mapping, reasoning and errors are the
adapters' own (:class:`~threadloom.providers.openai_chat.OpenAIChatProvider` in its
``openai`` dialect, :class:`~threadloom.providers.openai_responses.OpenAIResponsesProvider`).
``Model.model`` names the *deployment*: the SDK puts it in the path of Chat Completions
(``/openai/deployments/{deployment}/chat/completions?api-version=…``) and leaves it in the
body of the Responses API (``/openai/responses?api-version=…``).

Settings as the SDK defines them, read at the first request: the endpoint
(``azure_endpoint`` or ``AZURE_OPENAI_ENDPOINT``), the API version (``api_version`` or
``OPENAI_API_VERSION``), and one credential — an API key (``api_key`` or
``AZURE_OPENAI_API_KEY``, sent as ``api-key``), an Entra ID token
(``AZURE_OPENAI_AD_TOKEN``) or an Entra ID token provider (``azure_ad_token_provider``, a
function returning a token, sync or async, called for every request; e.g.
``azure.identity.aio.get_bearer_token_provider(DefaultAzureCredential(),
"https://cognitiveservices.azure.com/.default")``), sent as ``Authorization: Bearer``.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping

import openai

from threadloom.providers.errormap import missing_setting
from threadloom.providers.openai import DEFAULT_TIMEOUT
from threadloom.providers.openai_chat import OpenAIChatProvider
from threadloom.providers.openai_responses import OpenAIResponsesProvider

ENDPOINT_ENV = "AZURE_OPENAI_ENDPOINT"
API_KEY_ENV = "AZURE_OPENAI_API_KEY"
AD_TOKEN_ENV = "AZURE_OPENAI_AD_TOKEN"
API_VERSION_ENV = "OPENAI_API_VERSION"

TokenProvider = Callable[[], "str | Awaitable[str]"]


class AzureClient:
    """What both Azure adapters add to their OpenAI base: the settings and the client.

    A mixin placed before the OpenAI adapter class; it replaces ``new_client``,
    ``missing_credential``, ``key_env`` and ``base_url`` of
    :class:`~threadloom.providers.openai.OpenAIClientOwner`.
    """

    name: str
    _api_key: str | None
    _default_headers: dict[str, str] | None
    _client: openai.AsyncOpenAI | None

    def _azure_settings(
        self,
        azure_endpoint: str | None,
        api_version: str | None,
        azure_ad_token_provider: TokenProvider | None,
    ) -> None:
        self.azure_endpoint = azure_endpoint
        self.api_version = api_version
        self.azure_ad_token_provider = azure_ad_token_provider

    @property
    def key_env(self) -> str:
        return API_KEY_ENV

    def _endpoint(self) -> str | None:
        return self.azure_endpoint or os.environ.get(ENDPOINT_ENV) or None

    @property
    def base_url(self) -> str | None:
        """``<endpoint>/openai`` (the SDK's base URL for an endpoint), None without one."""
        if self._client is not None:
            return str(self._client.base_url)
        endpoint = self._endpoint()
        return f"{endpoint.rstrip('/')}/openai" if endpoint else None

    def missing_credential(self) -> str | None:
        """The first missing setting: ``AZURE_OPENAI_ENDPOINT``, ``OPENAI_API_VERSION``,
        then ``AZURE_OPENAI_API_KEY`` when no key, Entra ID token or token provider is
        given (spec 05 §5.2.3)."""
        if self._client is not None:
            return None
        if not self._endpoint():
            return ENDPOINT_ENV
        if not (self.api_version or os.environ.get(API_VERSION_ENV)):
            return API_VERSION_ENV
        if self._api_key or self.azure_ad_token_provider is not None:
            return None
        if os.environ.get(API_KEY_ENV) or os.environ.get(AD_TOKEN_ENV):
            return None
        return API_KEY_ENV

    def new_client(self) -> openai.AsyncOpenAI:
        """``AsyncAzureOpenAI`` with retries off; ``authentication`` for a missing
        setting (``"<VAR> is not set"``)."""
        variable, endpoint = self.missing_credential(), self._endpoint()
        if variable or endpoint is None:
            raise missing_setting(variable or ENDPOINT_ENV, self.name)
        return openai.AsyncAzureOpenAI(
            azure_endpoint=endpoint,
            api_version=self.api_version or os.environ[API_VERSION_ENV],
            api_key=self._api_key or None,
            azure_ad_token_provider=self.azure_ad_token_provider,
            max_retries=0,
            timeout=DEFAULT_TIMEOUT,
            default_headers=self._default_headers,
        )


class AzureOpenAIChatProvider(AzureClient, OpenAIChatProvider):
    """Chat Completions on Azure OpenAI (spec 05 §5.12.1): the ``openai`` dialect (no
    reasoning input; ``max_completion_tokens``; ``reasoning_effort``)."""

    def __init__(
        self,
        name: str = "azure-openai",
        *,
        azure_endpoint: str | None = None,
        api_version: str | None = None,
        api_key: str | None = None,
        azure_ad_token_provider: TokenProvider | None = None,
        default_headers: Mapping[str, str] | None = None,
    ) -> None:
        OpenAIChatProvider.__init__(
            self, name=name, api_key=api_key, dialect="openai", default_headers=default_headers
        )
        self._azure_settings(azure_endpoint, api_version, azure_ad_token_provider)


class AzureOpenAIResponsesProvider(AzureClient, OpenAIResponsesProvider):
    """The Responses API on Azure OpenAI (spec 05 §5.12.1), reasoning items replayed from
    their encrypted content as on OpenAI (``store`` False by default)."""

    def __init__(
        self,
        name: str = "azure-openai-responses",
        *,
        azure_endpoint: str | None = None,
        api_version: str | None = None,
        api_key: str | None = None,
        azure_ad_token_provider: TokenProvider | None = None,
        store: bool = False,
        default_headers: Mapping[str, str] | None = None,
    ) -> None:
        OpenAIResponsesProvider.__init__(
            self, name=name, api_key=api_key, store=store, default_headers=default_headers
        )
        self._azure_settings(azure_endpoint, api_version, azure_ad_token_provider)


__all__ = [
    "AD_TOKEN_ENV",
    "API_KEY_ENV",
    "API_VERSION_ENV",
    "ENDPOINT_ENV",
    "AzureClient",
    "AzureOpenAIChatProvider",
    "AzureOpenAIResponsesProvider",
]
