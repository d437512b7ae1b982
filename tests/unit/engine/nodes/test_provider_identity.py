"""What answers a prompt step, as its cache key sees it: never a secret."""

from __future__ import annotations

import inspect
import json

import pytest
from pydantic import SecretStr

from core.config import Settings
from core.engine.providers import (
    CommandProvider,
    FakeProvider,
    OpenAIProvider,
    ProviderRegistry,
    public_url,
)

KEY = "sk-live-0123456789abcdef"


def test_each_provider_names_itself_and_what_changes_its_answers() -> None:
    assert FakeProvider().identity() == {"name": "fake"}
    llm = CommandProvider.parse("llm -m gpt-4o").identity()
    assert llm["name"] == "command" and llm["program"] == "llm"
    assert llm != CommandProvider.parse("llm -m gpt-4.1").identity()  # another model, another key
    assert llm == CommandProvider.parse("llm  -m 'gpt-4o'").identity()  # the same argv, quoted otherwise
    openai = OpenAIProvider(base_url="https://api.openai.com/v1/", model="gpt-4o-mini", api_key=KEY)
    assert openai.identity() == {"name": "openai", "model": "gpt-4o-mini", "base_url": "https://api.openai.com/v1"}


def test_no_secret_reaches_an_identity() -> None:
    with_token = CommandProvider.parse(f"llm --key {KEY} -m gpt-4o").identity()
    assert KEY not in json.dumps(with_token)  # arguments only as a digest
    openai = OpenAIProvider(
        base_url=f"https://bob:{KEY}@llm.internal:8443/v1?api-key={KEY}#frag", model="m", api_key=KEY
    )
    identity = openai.identity()
    assert KEY not in json.dumps(identity)
    assert identity["base_url"] == "https://llm.internal:8443/v1"


@pytest.mark.parametrize(
    ("url", "public"),
    [
        ("http://127.0.0.1:8080/v1", "http://127.0.0.1:8080/v1"),
        ("https://user:pw@[::1]:9/v1/", "https://[::1]:9/v1"),
        ("https://host/v1?key=x", "https://host/v1"),
    ],
)
def test_public_url(url: str, public: str) -> None:
    assert public_url(url) == public


def test_every_constructor_option_is_in_the_identity_or_declared_irrelevant() -> None:
    """A new option that changes answers must join `identity()`; this lists those that do not."""
    irrelevant = {"api_key", "attempts", "backoff", "max_backoff"}  # a secret; how to retry
    keyed = {"base_url", "model"}
    options = set(inspect.signature(OpenAIProvider.__init__).parameters) - {"self"}
    assert options == irrelevant | keyed
    assert set(inspect.signature(CommandProvider.__init__).parameters) - {"self"} == {"argv"}


def test_the_registry_resolves_the_name_a_step_gives_or_the_default() -> None:
    settings = Settings(
        prompt_provider="command",
        prompt_command="llm -m gpt-4o",
        openai_model="gpt-4.1",
        openai_api_key=SecretStr(KEY),
    )
    registry = ProviderRegistry.from_settings(settings)
    assert registry.identity(None)["name"] == "command"
    assert registry.identity("openai")["model"] == "gpt-4.1"
    assert registry.identity("nope") == {"name": "nope", "configured": False}
    assert KEY not in json.dumps([registry.identity(n) for n in registry.names()])
    assert registry.reads_env(None) and not registry.reads_env("fake") and not registry.reads_env("openai")
    assert registry.reads_env("nope")  # unknown: assume it does (a key too wide is safe)
