"""`load_settings`: a wrong setting is one line naming the variable; flags override."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.settings import load_settings
from core.errors import ConfigurationError


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No BATON_* from the developer's shell or a `.env` in the working directory."""
    import os

    for name in list(os.environ):
        if name.startswith("BATON_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def test_a_value_out_of_range_names_the_variable_on_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BATON_MAX_PARALLEL", "0")
    with pytest.raises(ConfigurationError) as info:
        load_settings()
    assert info.value.message == "BATON_MAX_PARALLEL: Input should be greater than or equal to 1 (got '0')"
    assert "\n" not in info.value.message
    assert info.value.hint  # the next step


def test_a_choice_setting_lists_the_allowed_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BATON_LOG_LEVEL", "LOUD")
    with pytest.raises(ConfigurationError, match=r"^BATON_LOG_LEVEL: .*'DEBUG'.*\(got 'LOUD'\)$"):
        load_settings()


def test_malformed_json_in_a_structured_setting_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BATON_ACCESS", "{admins: [ana]")
    with pytest.raises(ConfigurationError, match=r"^BATON_ACCESS: not valid JSON; write an object such as"):
        load_settings()


ACCESS_MISTAKES = [  # BATON_ACCESS, the start of its one line
    ('{"admin": ["console:ana"], "runn": {"*": ["console:ana"]}}',
     'BATON_ACCESS: unknown key "admin" (did you mean "admins"?); BATON_ACCESS: unknown key "runn" '
     '(did you mean "run"?); the keys of BATON_ACCESS are admins, groups, people, run, approve, '
     "approver_not_requester"),
    ('{"admins": "console:ana"}', "BATON_ACCESS.admins: must be a JSON list of user ids or groups, e.g. "),
    ('{"run": ["console:ana"]}', 'BATON_ACCESS.run: must be an object of workflow name (or "*") -> list'),
    ('{"run": {"deploy": "console:ana"}}', 'BATON_ACCESS.run.deploy: must be a list of user ids such as'),
    ('{"approve": {"*": [5]}}', 'BATON_ACCESS.approve.*[0]: must be a user id in quotes, such as'),
    ('{"approve": {"*": ["slack:ana"]}}', "BATON_ACCESS.approve.*[0]: 'slack:ana' is not a user id; write "),
    ('{"approve": {"*": ["group:sre"]}}',
     "BATON_ACCESS: approve.* names 'group:sre', which is not in groups"),
    ('{"groups": {"sre": "slack:U1"}}', "BATON_ACCESS.groups.sre: must be a list of user ids such as"),
    ('{"groups": {"SRE": ["slack:U1"]}}', "BATON_ACCESS.groups.SRE: 'SRE' is not a group name"),
    ('{"admins": ["*"]}', 'BATON_ACCESS.admins[0]: "*" cannot be an admin'),
    ('{"approver_not_requester": "yes"}',
     "BATON_ACCESS.approver_not_requester: must be true or false (got 'yes')"),
    ('["console:ana"]', "BATON_ACCESS: must be a JSON object; write an object such as"),
    ("null", "BATON_ACCESS: null grants nothing; unset BATON_ACCESS to let everyone run and approve"),
    ("", "BATON_ACCESS: not valid JSON; write an object such as"),
    ('{"run": {"*": ["console:ana"]}, "run": {"*": ["*"]}}',  # JSON alone would keep the last
     'BATON_ACCESS: the key "run" appears twice in one object; write each key once'),
    ('{"approve": {"deploy": ["console:ana"], "deploy": ["*"]}}',
     'BATON_ACCESS: the key "deploy" appears twice in one object; write each key once'),
    ('{"groups": {"sre": ["console:ana"]}, "admins": ["group:sre"], "groups": {}}',
     'BATON_ACCESS: the key "groups" appears twice in one object'),
    ('{"people": {"ana": ["slack:U1", "discord:42"], "bob": ["discord:42"]}}',
     "BATON_ACCESS: 'discord:42' is in people.ana and people.bob; an account belongs to one person"),
    ('{"people": {"ana": ["slack:U1", "mcp:ci"]}}',
     "BATON_ACCESS: people.ana lists 'mcp:ci': an agent is nobody's account"),
    ('{"people": {"ana": ["group:sre"]}}', "BATON_ACCESS.people.ana[0]: 'group:sre' is not a user id"),
    ('{"people": ["slack:U1"]}', "BATON_ACCESS.people: must be an object of person -> their ids"),
]


@pytest.mark.parametrize(("value", "line"), ACCESS_MISTAKES)
def test_each_access_mistake_is_one_line_naming_the_key_and_the_fix(
    monkeypatch: pytest.MonkeyPatch, value: str, line: str
) -> None:
    monkeypatch.setenv("BATON_ACCESS", value)
    with pytest.raises(ConfigurationError) as info:
        load_settings()
    assert info.value.message.startswith(line)
    assert "\n" not in info.value.message and info.value.hint == ""  # the fix is on that line


def test_an_unset_access_is_none_and_everyone_may_run_and_approve() -> None:
    settings = load_settings()
    assert settings.access is None
    assert settings.access_policy.run == {"*": ["*"]} and settings.access_policy.approve == {"*": ["*"]}


def test_a_set_access_grants_only_what_it_says(monkeypatch: pytest.MonkeyPatch) -> None:
    value = '{"groups": {"sre": ["slack:U1", "discord:2"]}, "run": {"deploy": ["group:sre"]}}'
    monkeypatch.setenv("BATON_ACCESS", value)
    policy = load_settings().access_policy
    assert policy.run == {"deploy": ["group:sre"]} and policy.approve == {} and policy.admins == []


def test_secret_values_are_never_echoed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BATON_DISCORD_GUILD_ID", "not-a-number")
    monkeypatch.setenv("BATON_DISCORD_TOKEN", "super-secret-discord-token")
    with pytest.raises(ConfigurationError) as info:
        load_settings()
    assert info.value.message.startswith("BATON_DISCORD_GUILD_ID: ")
    assert "super-secret" not in info.value.message


def test_flags_override_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("BATON_DATABASE_URL", "sqlite:///from-env.db")
    monkeypatch.setenv("BATON_WORKFLOW_DIRS", "env-a,env-b")
    settings = load_settings(database_url="sqlite:///flag.db", workflow_dirs=[tmp_path / "a", tmp_path / "b"])
    assert settings.database_url == "sqlite:///flag.db"
    assert settings.workflow_dirs == [tmp_path / "a", tmp_path / "b"]


def test_without_flags_the_environment_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BATON_WORKFLOW_DIRS", "env-a,env-b")
    monkeypatch.setenv("BATON_MAX_PARALLEL", "7")
    settings = load_settings()
    assert settings.workflow_dirs == [Path("env-a"), Path("env-b")]
    assert settings.max_parallel == 7


def test_a_bad_flag_value_names_the_flag() -> None:
    with pytest.raises(ConfigurationError, match=r"^--database-url: "):
        load_settings(database_url=None, overrides={"database_url": 5})


def test_the_group_commit_window_reaches_the_engine_in_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    from bot.app import build_baton

    monkeypatch.setenv("BATON_GROUP_COMMIT_MS", "0")  # one commit per pure result
    monkeypatch.setenv("BATON_TOOL_MODULES", "[]")
    baton = build_baton(load_settings())
    try:
        assert baton.engine.config.group_commit == 0.0
    finally:
        baton.close()
    monkeypatch.setenv("BATON_GROUP_COMMIT_MS", "25")
    assert load_settings().group_commit_ms == 25.0
    monkeypatch.setenv("BATON_GROUP_COMMIT_MS", "-1")
    with pytest.raises(ConfigurationError, match=r"^BATON_GROUP_COMMIT_MS: .*greater than or equal to 0"):
        load_settings()


def test_the_event_redelivery_window_reaches_the_handler(monkeypatch: pytest.MonkeyPatch) -> None:
    from bot.app import build_baton

    assert load_settings().event_stale_seconds == 60.0
    monkeypatch.setenv("BATON_EVENT_STALE_SECONDS", "2.5")
    monkeypatch.setenv("BATON_TOOL_MODULES", "[]")
    baton = build_baton(load_settings())
    try:
        assert baton.handler.event_stale_after == 2.5
    finally:
        baton.close()


@pytest.mark.parametrize("value", ["0", "-1"])
def test_an_event_window_that_is_not_positive_is_refused_on_one_line(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("BATON_EVENT_STALE_SECONDS", value)
    with pytest.raises(ConfigurationError) as info:
        load_settings()
    assert info.value.message == f"BATON_EVENT_STALE_SECONDS: Input should be greater than 0 (got '{value}')"
    assert "\n" not in info.value.message


def test_run_pages_are_on_by_default_off_by_word_or_zero_and_link_where_configured(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = load_settings()
    assert settings.web_enabled and settings.page_base_url == "http://127.0.0.1:8080"
    for off in ("off", "0", ""):
        monkeypatch.setenv("BATON_WEB_PORT", off)
        assert not load_settings().web_enabled
    monkeypatch.setenv("BATON_WEB_PORT", "9000")
    monkeypatch.setenv("BATON_WEB_HOST", "0.0.0.0")
    assert load_settings().page_base_url == "http://127.0.0.1:9000"
    monkeypatch.setenv("BATON_PUBLIC_URL", "https://baton.example.com/")
    assert load_settings().page_base_url == "https://baton.example.com"


def test_pages_off_keeps_the_http_server_for_health_slack_and_mcp(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BATON_PAGES", "off")
    settings = load_settings()
    assert settings.http_enabled and not settings.web_enabled
    monkeypatch.setenv("BATON_WEB_PORT", "off")
    assert not load_settings().http_enabled


@pytest.mark.parametrize(("old", "value"), [("BATON_SLACK_PORT", "3000"), ("BATON_HEALTH_PORT", "8081"),
                                            ("BATON_HEALTH_HOST", "0.0.0.0"), ("BATON_HEALTH_PORT", "off")])
def test_the_retired_ports_are_refused_in_one_line_naming_their_replacement(
    monkeypatch: pytest.MonkeyPatch, old: str, value: str
) -> None:
    monkeypatch.setenv(old, value)
    with pytest.raises(ConfigurationError, match=rf"^{old}: no longer read: .* BATON_WEB_PORT") as info:
        load_settings()
    assert "\n" not in info.value.message


def test_a_bad_public_url_names_the_variable_and_the_web_secret_is_never_echoed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("BATON_PUBLIC_URL", "baton.example.com")
    with pytest.raises(ConfigurationError, match=r"^BATON_PUBLIC_URL: must be an http:// or https://"):
        load_settings()
    monkeypatch.delenv("BATON_PUBLIC_URL")
    monkeypatch.setenv("BATON_WEB_SECRET", "page-signing-secret")
    monkeypatch.setenv("BATON_WEB_LINK_TTL", "-1")
    with pytest.raises(ConfigurationError) as info:
        load_settings()
    assert info.value.message.startswith("BATON_WEB_LINK_TTL: ")
    monkeypatch.setenv("BATON_WEB_LINK_TTL", "60")
    assert "page-signing-secret" in load_settings().secrets()  # redacted like every other secret


def test_agents_are_principals_with_tokens_by_hash_and_a_place_to_report(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    digest = "ab" * 32
    monkeypatch.setenv("BATON_ACCESS", '{"run": {"*": ["mcp:ci-agent"]}, "approve": {"d": ["mcp:local"]}}')
    monkeypatch.setenv("BATON_MCP_TOKENS", f'{{"{digest.upper()}": "ci-agent"}}')
    monkeypatch.setenv("BATON_MCP_POST_TO", "slack:C024BE7LH")
    settings = load_settings()
    assert settings.mcp_principal == "mcp:local" and settings.mcp_enabled
    assert settings.mcp_tokens == {digest: "ci-agent"}
    assert settings.mcp_post_to == "slack:C024BE7LH"
    assert settings.access is not None and settings.access.run["*"] == ["mcp:ci-agent"]


@pytest.mark.parametrize(
    ("name", "value", "cause"),
    [
        ("BATON_MCP_TOKENS", '{"my-secret-token": "ci"}', "is not a sha256 hex digest"),
        ("BATON_MCP_TOKENS", '{"' + "ab" * 32 + '": "ci agent"}', "is not an agent name"),
        ("BATON_MCP_PRINCIPAL", "mcp:", "must be mcp:<name>"),
        ("BATON_MCP_POST_TO", "C024BE7LH", "must be <platform>:<conversation>"),
        ("BATON_ACCESS", '{"run": {"*": ["mcp:bad name"]}}', "is not a user id"),
    ],
)
def test_a_bad_agent_setting_is_one_line_naming_it(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, cause: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigurationError) as info:
        load_settings()
    assert info.value.message.startswith(name) and cause in info.value.message
    assert "\n" not in info.value.message and "my-secret-token" not in info.value.message


def test_step_secrets_are_listed_names_never_batons_own_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BATON_STEP_SECRETS", "NPM_TOKEN, DEPLOY_TOKEN,NPM_TOKEN")
    assert load_settings().step_secrets == ["NPM_TOKEN", "DEPLOY_TOKEN"]
    monkeypatch.setenv("BATON_STEP_SECRETS", "NPM_TOKEN,BATON_SLACK_BOT_TOKEN")
    with pytest.raises(ConfigurationError, match=r"^BATON_STEP_SECRETS: 'BATON_SLACK_BOT_TOKEN' is one of"):
        load_settings()
    monkeypatch.setenv("BATON_STEP_SECRETS", "NPM-TOKEN")
    with pytest.raises(ConfigurationError, match=r"^BATON_STEP_SECRETS: 'NPM-TOKEN' is not a variable name"):
        load_settings()


@pytest.mark.parametrize(("url", "line"), [
    ("notaurl", "BATON_DATABASE_URL: is not a database URL; use sqlite:///path/to/baton.db (four slashes"),
    ("sqlite://baton.db", "BATON_DATABASE_URL: names a host ('baton.db'), which SQLite has none of"),
    ("mysql://root:pw-9f2c@db/baton", "BATON_DATABASE_URL: uses 'mysql'; Baton stores runs in SQLite or"),
])  # fmt: skip
def test_a_database_url_baton_cannot_open_is_one_line_at_start_never_showing_its_password(
    monkeypatch: pytest.MonkeyPatch, url: str, line: str
) -> None:
    monkeypatch.setenv("BATON_DATABASE_URL", url)
    with pytest.raises(ConfigurationError) as info:
        load_settings()
    assert info.value.message.startswith(line) and "\n" not in info.value.message
    assert "pw-9f2c" not in info.value.message
