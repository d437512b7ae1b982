"""slack/manifest.yaml declares what the Slack adapter relies on."""

from __future__ import annotations

from pathlib import Path

import yaml

MANIFEST = Path(__file__).resolve().parents[3] / "slack" / "manifest.yaml"


def test_the_manifest_turns_on_the_home_and_messages_tabs_and_group_direct_messages() -> None:
    manifest = yaml.safe_load(MANIFEST.read_text())

    home = manifest["features"]["app_home"]
    assert home["home_tab_enabled"] and home["messages_tab_enabled"]
    assert not home["messages_tab_read_only_enabled"]
    scopes = set(manifest["oauth_config"]["scopes"]["bot"])
    assert {"mpim:history", "im:history", "chat:write", "commands", "users:read"} <= scopes
    events = set(manifest["settings"]["event_subscriptions"]["bot_events"])
    assert {"message.mpim", "message.im", "app_home_opened", "app_mention"} <= events
    assert manifest["settings"]["interactivity"]["is_enabled"]  # buttons and modals
