"""Turning ``provider:model`` strings into LangChain chat models."""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel

from context import ModelConfigError

__all__ = ["resolve_model"]


def resolve_model(spec: str | BaseChatModel, **kwargs: Any) -> BaseChatModel:
    """A chat model from ``"provider:model"`` via ``langchain.chat_models.init_chat_model``, or
    the model itself. Raises ``ModelConfigError`` naming the spec and the package to install."""
    if isinstance(spec, BaseChatModel):
        return spec
    if not isinstance(spec, str) or ":" not in spec or not spec.split(":", 1)[1]:
        raise ModelConfigError(
            f"model {spec!r} is not of the form provider:model (e.g. openai:gpt-4o, anthropic:claude-sonnet-4-5)"
        )
    try:
        from langchain.chat_models import init_chat_model
    except ImportError as exc:  # pragma: no cover - langchain is a dependency
        raise ModelConfigError("init_chat_model needs the 'langchain' package; pip install langchain") from exc
    provider = spec.split(":", 1)[0]
    try:
        return init_chat_model(spec, **kwargs)
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
