"""``provider:model`` strings to LangChain chat models, and provider failures to one line.

Retries and timeouts are the provider client's own; :func:`model_error` turns what is left into
a :class:`context.ModelCallError`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langchain_core import exceptions as lce

from context import ContextLengthError, ModelCallError, ModelConfigError

if TYPE_CHECKING:  # (annotations only: the chat-model classes are slow to import)
    from langchain_core.language_models import BaseChatModel

__all__ = [
    "AUTO_BUDGET_CAP",
    "DEFAULT_RETRIES",
    "DEFAULT_TIMEOUT",
    "auto_budget",
    "model_error",
    "request_timeout",
    "resolve_model",
]

#: The default cost target of ``--budget auto``: the most tokens one call may take (prompt and the
#: answer's reserve), whatever the model's window.
AUTO_BUDGET_CAP = 16_000

#: seconds a request to the provider may take (``taskctx run --timeout``)
DEFAULT_TIMEOUT = 60.0
#: retries of a failed request by the provider client (429, 5xx, connection errors)
DEFAULT_RETRIES = 2


#: what a 400 says when the prompt is longer than the model's window (where the integration does
#: not raise langchain-core's ContextOverflowError itself)
_TOO_LONG = ("context_length_exceeded", "maximum context length", "context window", "prompt is too long")


def model_error(exc: BaseException, *, role: str | None = None, timeout: float | None = None) -> ModelCallError | None:
    """A provider failure as a :class:`~context.ModelCallError` with a one-line cause.

    The kind comes from langchain-core's standard model exceptions (``ModelError`` and below,
    which langchain-openai and langchain-anthropic raise), the HTTP status from ``status_code``,
    the text from the provider's error body.

    Args:
        exc: The exception the model call raised.
        role: The role that called the model (named in the line).
        timeout: The seconds a request was given, named in a timeout's line when known.

    Returns:
        The error (``ContextLengthError`` for a prompt too long), or None when ``exc`` is not a
        provider failure (a bug: the caller raises it as it is).
    """
    if isinstance(exc, ModelCallError):
        return exc
    status = getattr(exc, "status_code", None)
    if not isinstance(exc, lce.ModelError) and not isinstance(status, int):
        return None
    body = getattr(exc, "body", None)
    text = str(getattr(exc, "message", None) or exc)
    if isinstance(body, dict):
        inner = body.get("error")
        err = inner if isinstance(inner, dict) else body
        text = str(err.get("message") or text)
    text = " ".join(text.split())
    short = text if len(text) <= 160 else text[:157] + "..."
    code = f" ({status})" if isinstance(status, int) else ""
    if isinstance(exc, lce.ModelTimeoutError):
        within = f"{timeout:g} s" if timeout else "--timeout seconds"
        return ModelCallError(f"timed out (no answer within {within}); raise --timeout", role=role)
    if isinstance(exc, lce.ModelConnectionError):
        cause: BaseException | None = exc
        while cause is not None and not isinstance(cause, ConnectionRefusedError):
            cause = cause.__cause__ or cause.__context__
        what = "connection refused" if cause is not None else "connection failed"
        return ModelCallError(f"{what} ({short}); check the network and the provider's base URL", role=role)
    if isinstance(exc, lce.ContextOverflowError) or (status == 400 and any(k in text.lower() for k in _TOO_LONG)):
        return ContextLengthError(f"context length exceeded{code}: {short}", status=status, role=role)
    kinds: list[tuple[type[BaseException], int, str]] = [
        (lce.ModelAuthenticationError, 401, "authentication failed{code}: check the API key"),
        (lce.ModelPermissionDeniedError, 403, "permission denied{code}: the key may not use this model"),
        (lce.ModelNotFoundError, 404, "model not found{code}: check --model"),
        (lce.ModelRateLimitError, 429, "rate limited{code} after the client's retries"),
        (lce.ModelAPIError, 500, "provider error{code} after the client's retries"),
    ]
    for cls, st, head in kinds:
        if isinstance(exc, cls) or status == st or (st == 500 and isinstance(status, int) and status >= 500):
            return ModelCallError(f"{head.format(code=code)}; {short}", status=status, role=role)
    return ModelCallError(f"request refused{code}: {short}", status=status, role=role)


def resolve_model(spec: str | BaseChatModel, **kwargs: Any) -> BaseChatModel:
    """A chat model from ``"provider:model"``, through ``langchain.chat_models.init_chat_model``.

    Args:
        spec: ``"provider:model"`` (e.g. ``openai:gpt-4o``), or a chat model, returned as it is.
        **kwargs: Passed to ``init_chat_model`` (``temperature``, ``max_retries``, ``timeout``...);
            an ``openai:`` model gets ``stream_usage=True`` unless given, so that a streamed call
            reports its usage as a non-streamed one does.

    Returns:
        The chat model.

    Raises:
        ModelConfigError: The spec is not ``provider:model``, or the provider's package is not
            installed (named with the ``pip install`` that fixes it).
    """
    from langchain_core.language_models import BaseChatModel  # (slow to import: only when a model is made)

    if isinstance(spec, BaseChatModel):
        return spec
    if not isinstance(spec, str) or ":" not in spec or not spec.split(":", 1)[1]:
        raise ModelConfigError(
            f"model {spec!r} is not of the form provider:model (e.g. openai:gpt-4o, anthropic:claude-sonnet-4-5)"
        )
    try:  # (imported here: langchain's chat-model factory is slow to import)
        from langchain.chat_models import init_chat_model
    except ImportError as exc:  # pragma: no cover - langchain is a dependency
        raise ModelConfigError("init_chat_model needs the 'langchain' package; pip install langchain") from exc
    provider = spec.split(":", 1)[0]
    if provider == "openai":  # a streamed call reports its usage too (langchain-openai leaves it off
        kwargs.setdefault("stream_usage", True)  # when OPENAI_BASE_URL is set); taskctx records it per call
    try:
        model: BaseChatModel = init_chat_model(spec, **kwargs)  # (a spec with no configurable fields)
        return model
    except ImportError as exc:
        raise ModelConfigError(
            f"model {spec!r}: the integration for provider {provider!r} is not installed ({exc}); "
            f"pip install langchain-{provider.replace('_', '-')}"
        ) from exc
    except ValueError as exc:
        text = str(exc)
        supported = next((ln for ln in text.splitlines() if ln.startswith("Supported providers")), "")
        if supported:
            raise ModelConfigError(
                f"model {spec!r}: unknown provider {provider!r}; {supported.lower()} (use provider:model)"
            ) from exc
        raise ModelConfigError(f"model {spec!r}: {' '.join(text.split())}") from exc
    except Exception as exc:  # provider client errors (e.g. a missing API key)
        raise ModelConfigError(f"model {spec!r} could not be created: {exc}") from exc


def request_timeout(model: Any) -> float | None:
    """The seconds one request of ``model`` may take, as its client was configured.

    Args:
        model: A chat model (ChatOpenAI's ``request_timeout``, ChatAnthropic's
            ``default_request_timeout``).

    Returns:
        The seconds, or None when the model has no number.
    """
    for name in ("request_timeout", "default_request_timeout"):
        value = getattr(model, name, None)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    return None


def auto_budget(model: BaseChatModel, *, reserve_for_output: int, cap: int = AUTO_BUDGET_CAP) -> int:
    """The budget that fits the model: its context window from its profile, capped by a cost target.

    The window is the profile's ``max_input_tokens`` (langchain-core's ``BaseChatModel.profile``,
    filled from the provider's model data; taskctx's offline models declare one). A prompt then
    gets the window less ``reserve_for_output``, the answer's tokens.

    Args:
        model: The chat model.
        reserve_for_output: Tokens of the budget kept for the answer.
        cap: The cost target: the most tokens one call may take (default ``AUTO_BUDGET_CAP``).

    Returns:
        ``min(max_input_tokens, cap)`` tokens.

    Raises:
        ModelConfigError: The model's profile names no context window, or the budget would not
            hold the reserve (a cap or window at or below it).
    """
    name = type(model).__name__
    profile = getattr(model, "profile", None) or {}
    window = profile.get("max_input_tokens")
    if not window:
        raise ModelConfigError(
            f"--budget auto needs the model's context window, and {name} declares none (its profile has no "
            "max_input_tokens); pass --budget N in tokens"
        )
    budget = min(int(window), cap)
    if budget <= reserve_for_output:
        raise ModelConfigError(
            f"--budget auto gives {budget} tokens ({name}'s window {window}, cost target {cap}), no more than the "
            f"{reserve_for_output} reserved for the answer; raise the cost target or pass --budget N"
        )
    return budget
