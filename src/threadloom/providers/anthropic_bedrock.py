"""Claude on Amazon Bedrock (spec 05 §5.12.2): the Anthropic adapter with the SDK's own
``anthropic.AsyncAnthropicBedrock`` client.

Everything but the client is :class:`~threadloom.providers.anthropic.AnthropicProvider`'s:
request mapping, thinking rules, stream mapping, usage and errors. The SDK client sends
the same Messages body to ``POST /model/{modelId}/invoke-with-response-stream`` (model
and ``stream`` move from the body to the path, ``anthropic_version`` becomes
``bedrock-2023-05-31``), signs it with AWS SigV4 (botocore) — or sends an Amazon Bedrock
API key as a bearer token — and decodes the AWS event-stream framing back into the
Messages events the shared mapper reads. ``Model.model`` is the Bedrock model id or
inference profile (``us.anthropic.claude-sonnet-4-20250514-v1:0``).

Credentials are AWS's, found as boto3 finds them (environment, shared files, SSO, roles),
read at the first request; the region is ``aws_region``, else ``AWS_REGION``, else the
boto3 session's (``AWS_DEFAULT_REGION``, profile), else ``us-east-1`` (the SDK's rules).
"""

from __future__ import annotations

import importlib
import os
import re
from typing import Any

import anthropic

from threadloom.errors import ProviderError
from threadloom.providers.anthropic import TIMEOUT, AnthropicProvider, map_error
from threadloom.providers.errormap import code_for_error, missing_setting

#: The variable named when no AWS credential can be found (spec 05 §5.2.3).
ACCESS_KEY_ENV = "AWS_ACCESS_KEY_ID"
#: An Amazon Bedrock API key, sent as ``Authorization: Bearer`` instead of SigV4.
BEARER_TOKEN_ENV = "AWS_BEARER_TOKEN_BEDROCK"
#: Settings whose presence means boto3 has a credential source to try.
_CREDENTIAL_HINTS = (
    ACCESS_KEY_ENV,
    "AWS_PROFILE",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
)
#: What the SDK raises when boto3 finds no credential to sign with.
_NO_CREDENTIALS = "could not resolve credentials from session"
#: How the SDK's event-stream decoder reports an exception message of the stream.
_EXCEPTION_TYPE = re.compile(r"['\"]:exception-type['\"]:\s*['\"](\w+)['\"]")


def _require(*modules: str) -> None:
    """Import the optional libraries the Bedrock client needs, or fail with the install
    hint (the registry reports it as ``provider anthropic-bedrock is not available``)."""
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise ImportError(
                f"{module} is not installed (pip install 'threadloom[bedrock]')"
            ) from exc


class AnthropicBedrockProvider(AnthropicProvider):
    """The Anthropic adapter on Amazon Bedrock (spec 05 §5.12.2).

    ``api_key`` (or ``AWS_BEARER_TOKEN_BEDROCK``) is a Bedrock API key; without one the
    request is SigV4-signed with ``aws_access_key`` / ``aws_secret_key`` /
    ``aws_session_token`` / ``aws_profile`` when given, else boto3's credential chain.
    ``base_url`` defaults to ``ANTHROPIC_BEDROCK_BASE_URL``, else the region's
    ``https://bedrock-runtime.<region>.amazonaws.com``.

    It makes no native compaction item (spec 23 §23.2 rule 7): the SDK's Bedrock client
    has no token counting, so whether a range reaches the API's compaction trigger cannot
    be known without paying for a turn; compactions keep the text summary.
    """

    native_compaction = None

    def __init__(
        self,
        name: str = "anthropic-bedrock",
        *,
        aws_region: str | None = None,
        aws_access_key: str | None = None,
        aws_secret_key: str | None = None,
        aws_session_token: str | None = None,
        aws_profile: str | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        default_max_tokens: int = 8192,
    ) -> None:
        if api_key is None and not os.environ.get(BEARER_TOKEN_ENV):
            _require("boto3", "botocore")
        super().__init__(
            name=name, api_key=api_key, base_url=base_url, default_max_tokens=default_max_tokens
        )
        self.aws_region = aws_region
        self.aws_access_key = aws_access_key
        self.aws_secret_key = aws_secret_key
        self.aws_session_token = aws_session_token
        self.aws_profile = aws_profile

    def _bearer(self) -> str | None:
        return self.api_key or os.environ.get(BEARER_TOKEN_ENV) or None

    def _has_credential_hint(self) -> bool:
        """A credential, or a setting naming where boto3 will find one (cheap: no I/O)."""
        if self._bearer() or self.aws_access_key or self.aws_profile:
            return True
        return any(os.environ.get(v) for v in _CREDENTIAL_HINTS)

    def missing_credential(self) -> str | None:
        """``AWS_ACCESS_KEY_ID`` when neither a Bedrock API key nor any AWS credential can
        be found. Without a setting pointing at one, boto3's chain is asked (shared files,
        SSO, the instance's role), which may take a second off AWS; this runs when
        definitions load, not per request."""
        if self._has_credential_hint():
            return None
        boto3: Any = importlib.import_module("boto3")
        session = boto3.Session(region_name=self.aws_region)
        return None if session.get_credentials() is not None else ACCESS_KEY_ENV

    def new_client(self) -> anthropic.AsyncAnthropicBedrock:
        """``AsyncAnthropicBedrock`` with retries off. AWS credentials are resolved by the
        SDK when it signs the first request (off the event loop); none found →
        ``authentication`` ``AWS_ACCESS_KEY_ID is not set`` (:meth:`map_error`)."""
        bearer = self._bearer()
        if bearer is None:
            return anthropic.AsyncAnthropicBedrock(
                aws_region=self.aws_region,
                aws_access_key=self.aws_access_key,
                aws_secret_key=self.aws_secret_key,
                aws_session_token=self.aws_session_token,
                aws_profile=self.aws_profile,
                base_url=self.base_url,
                max_retries=0,
                timeout=TIMEOUT,
            )
        return anthropic.AsyncAnthropicBedrock(
            api_key=bearer,
            aws_region=self.aws_region,
            base_url=self.base_url,
            max_retries=0,
            timeout=TIMEOUT,
        )

    def map_error(self, exc: BaseException) -> ProviderError:
        """As the Anthropic adapter maps errors, plus Bedrock's exception messages inside
        the event stream (``throttlingException`` → ``rate_limit``,
        ``serviceUnavailableException`` → ``overloaded``, …, spec 05 §5.12.2), and no
        AWS credential → ``authentication`` ``AWS_ACCESS_KEY_ID is not set``."""
        if isinstance(exc, RuntimeError) and str(exc) == _NO_CREDENTIALS:
            return missing_setting(ACCESS_KEY_ENV, self.name)
        if isinstance(exc, ValueError):
            match = _EXCEPTION_TYPE.search(str(exc))
            if match is not None:
                kind = match.group(1)
                return ProviderError(
                    f"Bedrock stream exception: {kind}",
                    code=code_for_error(kind),
                    provider=self.name,
                    body=str(exc),
                )
        return map_error(exc, self.name)


__all__ = ["ACCESS_KEY_ENV", "BEARER_TOKEN_ENV", "AnthropicBedrockProvider"]
