"""The demo's model: the scripted agent offline, or a real chat model when asked for one.

`choose_model` never raises anything but `ModelSetupError`, whose message is the one
line the command prints (a missing key, a missing package, an unknown provider). Its
subclass `ModelSpecError` says `--model` itself is wrong (a usage error, exit status 2);
anything else is a setup that failed (exit status 1).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from langchain_contextkit.errors import ModelSetupError, ModelSpecError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from langchain_core.language_models import BaseChatModel

__all__ = [
    "DEFAULT_OPENAI_COMPATIBLE_MODEL",
    "ChosenModel",
    "choose_model",
]

DEFAULT_OPENAI_COMPATIBLE_MODEL = "gpt-4o-mini"
"""The model name sent to an `OPENAI_BASE_URL` server when `--model` names none."""

# The package and key of common providers, checked first for a clear message; others are
# left to init_chat_model and the provider's package.
_PROVIDERS = {
    "openai": ("langchain_openai", "langchain-openai", "OPENAI_API_KEY"),
    "anthropic": ("langchain_anthropic", "langchain-anthropic", "ANTHROPIC_API_KEY"),
    "google_genai": ("langchain_google_genai", "langchain-google-genai", "GOOGLE_API_KEY"),
    "mistralai": ("langchain_mistralai", "langchain-mistralai", "MISTRAL_API_KEY"),
    "groq": ("langchain_groq", "langchain-groq", "GROQ_API_KEY"),
    "deepseek": ("langchain_deepseek", "langchain-deepseek", "DEEPSEEK_API_KEY"),
    "xai": ("langchain_xai", "langchain-xai", "XAI_API_KEY"),
    "fireworks": ("langchain_fireworks", "langchain-fireworks", "FIREWORKS_API_KEY"),
    "together": ("langchain_together", "langchain-together", "TOGETHER_API_KEY"),
    "cohere": ("langchain_cohere", "langchain-cohere", "COHERE_API_KEY"),
}
# Local OpenAI-compatible servers mostly take any key; the client insists on one.
_PLACEHOLDER_KEY = "not-needed"


@dataclass(frozen=True, slots=True)
class ChosenModel:
    """The chat model for the session, and how to name it in the output."""

    model: BaseChatModel | None
    """None: the offline scripted agent."""

    label: str


def choose_model(
    spec: str | None, *, max_tokens: int, env: Mapping[str, str] | None = None
) -> ChosenModel:
    """Pick the session's model from `--model` and the environment.

    - no `--model` and no ``OPENAI_BASE_URL``: the scripted agent (offline);
    - ``OPENAI_BASE_URL`` set and `spec` without a provider (or ``openai:``):
      `ChatOpenAI` against that server, model `spec` or a default name;
    - otherwise `init_chat_model(spec)`, which needs the provider's package and key.

    Raises:
        ModelSpecError: With the one line to print, when `spec` itself is wrong.
        ModelSetupError: With the one line to print, when the model cannot be set up.
    """
    env = os.environ if env is None else env
    base_url = env.get("OPENAI_BASE_URL", "").strip()
    if spec is None and not base_url:
        return ChosenModel(None, "scripted agent (offline, no API key)")
    provider, _, name = (spec or "").rpartition(":")
    if base_url and provider in {"", "openai"}:
        return _openai_compatible(
            name or DEFAULT_OPENAI_COMPATIBLE_MODEL, base_url, env, max_tokens
        )
    assert spec is not None  # noqa: S101 - the base-url branch took the None case
    return _from_init_chat_model(spec, provider, env, max_tokens)


def _openai_compatible(
    name: str, base_url: str, env: Mapping[str, str], max_tokens: int
) -> ChosenModel:
    try:
        module = importlib.import_module("langchain_openai")
    except ImportError:
        msg = (
            "OPENAI_BASE_URL is set, which needs langchain-openai: "
            "pip install 'langchain-contextkit[openai]'"
        )
        raise ModelSetupError(msg) from None
    key = env.get("OPENAI_API_KEY") or _PLACEHOLDER_KEY
    try:
        model = module.ChatOpenAI(model=name, base_url=base_url, api_key=key, max_tokens=max_tokens)
    except Exception as error:  # noqa: BLE001 - any construction failure is one line
        msg = f"cannot use {name} at {base_url}: {_first_line(error)}"
        raise ModelSetupError(msg) from None
    return ChosenModel(model, f"{name} at {base_url} (OpenAI-compatible)")


def _from_init_chat_model(
    spec: str, provider: str, env: Mapping[str, str], max_tokens: int
) -> ChosenModel:
    if provider in _PROVIDERS:
        module, package, key = _PROVIDERS[provider]
        if not _importable(module):
            msg = f"--model {spec} needs the {package} package: pip install {package}"
            raise ModelSetupError(msg)
        if not env.get(key):
            msg = (
                f"--model {spec} needs {key} in the environment (no key is needed without --model)"
            )
            raise ModelSetupError(msg)
    from langchain.chat_models import init_chat_model  # noqa: PLC0415 - only with --model

    try:
        model = init_chat_model(spec, max_tokens=max_tokens)
    except ImportError as error:
        msg = f"--model {spec}: {_first_line(error)}"
        raise ModelSetupError(msg) from None
    except ValueError as error:
        text = _first_line(error)
        if "provider" in text.lower():
            msg = (
                f"--model {spec}: unknown or missing provider; write provider:name, e.g. "
                "openai:gpt-4o-mini or anthropic:claude-sonnet-4-5"
            )
            raise ModelSpecError(msg) from None
        msg = f"--model {spec}: {text}"
        raise ModelSetupError(msg) from None
    except Exception as error:  # noqa: BLE001 - e.g. a provider SDK's missing-credentials error
        msg = f"--model {spec}: {_first_line(error)}"
        raise ModelSetupError(msg) from None
    return ChosenModel(model, spec)


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a broken install, or a module set to None
        return False


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__
