"""The deterministic offline provider and the provider registry."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from core.config import Settings
from core.engine.contracts import check_output
from core.engine.providers import CommandProvider, FakeProvider, OpenAIProvider, ProviderRegistry
from core.errors import ConfigurationError
from core.workflows.model import OutputContract
from tests.unit.engine.nodes.conftest import MakeContext


async def test_same_prompt_same_answer_and_word_counted_tokens(make_ctx: MakeContext) -> None:
    fake = FakeProvider()
    first = await fake.complete("Write release notes for 1.2", ctx=make_ctx())
    again = await fake.complete("Write release notes for 1.2", ctx=make_ctx(node_id="other"))
    other = await fake.complete("Write release notes for 1.3", ctx=make_ctx())
    assert first == again
    assert first.text != other.text
    assert first.tokens_in == 5
    assert first.tokens_out == len(first.text.split())
    assert "Write release notes for 1.2" in first.text


async def test_schema_answers_satisfy_the_output_contract(make_ctx: MakeContext) -> None:
    schema = {
        "type": "object",
        "required": ["title", "body", "count", "tags"],
        "properties": {"count": {"type": "integer"}, "tags": {"type": "array"}},
    }
    completion = await FakeProvider().complete("notes for 1.2", ctx=make_ctx(), schema=schema)
    value = check_output("draft", completion.text, OutputContract(format="json", schema=schema))
    assert set(value) == {"title", "body", "count", "tags"}
    assert value["title"].startswith("title: ")
    assert "notes for 1.2" in value["body"]
    assert isinstance(value["count"], int)
    assert value["tags"] == []


async def test_json_without_a_schema_is_still_json(make_ctx: MakeContext) -> None:
    completion = await FakeProvider().complete("hello", ctx=make_ctx(), schema={})
    assert isinstance(check_output("n", completion.text, OutputContract(format="json")), str)


def _settings(**values: object) -> Settings:
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


def test_from_settings_defaults_to_fake() -> None:
    registry = ProviderRegistry.from_settings(_settings(prompt_provider="fake"))
    assert registry.get(None) is registry.get("fake")
    assert isinstance(registry.get("openai"), OpenAIProvider)
    assert registry.names() == ["fake", "openai"]


def test_from_settings_builds_the_command_provider_without_a_shell() -> None:
    registry = ProviderRegistry.from_settings(
        _settings(prompt_provider="command", prompt_command="llm -m 'gpt 4o' --no-stream")
    )
    provider = registry.get(None)
    assert isinstance(provider, CommandProvider)
    assert provider.argv == ("llm", "-m", "gpt 4o", "--no-stream")


def test_command_default_without_a_command_names_the_variable() -> None:
    with pytest.raises(ConfigurationError) as caught:
        ProviderRegistry.from_settings(_settings(prompt_provider="command"))
    assert "BATON_PROMPT_COMMAND" in caught.value.message


def test_unbalanced_quotes_in_the_command_are_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="BATON_PROMPT_COMMAND cannot be split"):
        ProviderRegistry.from_settings(_settings(prompt_command="llm -m 'gpt"))


def test_unknown_provider_lists_the_known_ones() -> None:
    registry = ProviderRegistry.from_settings(_settings())
    with pytest.raises(ConfigurationError) as caught:
        registry.get("anthropic")
    assert caught.value.message == "unknown prompt provider `anthropic` (known: `fake`, `openai`)"


def test_the_openai_key_never_shows_in_repr() -> None:
    registry = ProviderRegistry.from_settings(_settings(openai_api_key=SecretStr("sk-live-abcdef123456")))
    assert "sk-live-abcdef123456" not in repr(registry.get("openai"))
