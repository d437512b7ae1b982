"""The real `baton run` process against the mock Slack Web API, found through BATON_SLACK_API_URL."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.process import BatonProcess, clean_env, free_port
from tests.e2e.slack.conftest import BOT_TOKEN, SIGNING_SECRET, WORKFLOWS
from tests.e2e.slack.harness import SlackHarness
from tests.e2e.slack.mock_slack import MockSlack


def slack_env(mock: MockSlack, tmp_path: Path, database_url: str) -> dict[str, str]:
    """Slack in HTTP mode on a free BATON_WEB_PORT (`/slack/events`), without run pages."""
    return clean_env(
        BATON_SLACK_BOT_TOKEN=BOT_TOKEN, BATON_SLACK_SIGNING_SECRET=SIGNING_SECRET,
        BATON_SLACK_API_URL=mock.base_url, BATON_DATABASE_URL=database_url,
        BATON_WORKFLOW_DIRS=str(WORKFLOWS), BATON_DATA_DIR=str(tmp_path / "data"),
        BATON_WEB_PORT=str(free_port()), BATON_PAGES="off", BATON_TOOL_MODULES="[]", BATON_LOG_LEVEL="INFO",
    )


async def test_baton_run_serves_slack_through_the_web_api_at_its_configured_url(
    mock_slack: MockSlack, tmp_path: Path, sqlite_url: str
) -> None:
    baton = await BatonProcess.start(slack_env(mock_slack, tmp_path, sqlite_url), cwd=tmp_path)
    try:
        started = await baton.wait_log(r"action=slack_started .*port=(\d+)")
        slack = SlackHarness(f"http://127.0.0.1:{started.group(1)}/slack/events", SIGNING_SECRET, mock_slack)
        try:
            answer = await slack.command('run gated "v1"')
            assert answer.status == 200
            first = await mock_slack.wait_call("chat.postMessage", "Started", timeout=30)
            await mock_slack.wait_for(lambda calls: [
                c for c in calls
                if c.body.get("thread_ts") == first.ts and "waits for approval" in c.text], 30)
        finally:
            await slack.close()
        assert mock_slack.calls[0].method == "auth.test"  # the token was checked before serving
    finally:
        assert await baton.stop() == 0, baton.output


async def test_a_revoked_token_is_one_line_and_exit_2_never_restarted(
    mock_slack: MockSlack, tmp_path: Path, sqlite_url: str
) -> None:
    mock_slack.fail_next("auth.test", "token_revoked")  # only once: a restart would get in

    env = slack_env(mock_slack, tmp_path, sqlite_url)
    baton = await BatonProcess.start(env, "run", "--supervise", cwd=tmp_path)  # must not restart it

    assert await baton.exited() == 2, baton.output
    errors = [line for line in baton.lines if line.startswith("error: ")]
    assert errors == ["error: BATON_SLACK_BOT_TOKEN was refused by Slack (token_revoked)."], baton.output
    assert "Traceback" not in baton.output
    assert [c.method for c in mock_slack.calls] == ["auth.test"]  # the supervisor did not start it again


async def test_half_a_slack_configuration_stops_baton_run_with_the_setting_it_lacks(
    mock_slack: MockSlack, tmp_path: Path, sqlite_url: str
) -> None:
    """A bot token without an app token or signing secret used to leave Slack off silently
    (the console started instead); an empty signing secret started an HTTP mode that could
    verify nothing. Each is one line, exit 2, before Slack is called."""
    env = slack_env(mock_slack, tmp_path, sqlite_url)
    bot_only = {k: v for k, v in env.items() if k != "BATON_SLACK_SIGNING_SECRET"}
    app_only = {k: v for k, v in bot_only.items() if k != "BATON_SLACK_BOT_TOKEN"} | {
        "BATON_SLACK_APP_TOKEN": "xapp-1-A1-1-x"}
    for case, said in (
        (bot_only, "error: BATON_SLACK_BOT_TOKEN is set, but neither BATON_SLACK_APP_TOKEN (Socket Mode) nor "
                   "BATON_SLACK_SIGNING_SECRET (HTTP mode) is: Slack would stay off"),
        (app_only, "error: BATON_SLACK_APP_TOKEN is set without BATON_SLACK_BOT_TOKEN: Slack would stay off"),
        (env | {"BATON_SLACK_SIGNING_SECRET": " "},
         "error: BATON_SLACK_SIGNING_SECRET is empty: no request to /slack/events could be verified"),
        (env | {"BATON_DISCORD_GUILD_ID": "1100000000000000777"},  # Discord's token forgotten
         "error: BATON_DISCORD_GUILD_ID is set without BATON_DISCORD_TOKEN: Discord would stay off"),
    ):
        baton = await BatonProcess.start(case, "run", cwd=tmp_path)
        assert await baton.exited() == 2, baton.output
        assert [line for line in baton.lines if line.startswith("error: ")] == [said]
        assert "Traceback" not in baton.output and "Baton console" not in baton.output
    assert mock_slack.calls == []
