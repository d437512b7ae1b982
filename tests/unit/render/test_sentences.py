"""A platform's own sentences (its mechanics: uploads, expired buttons, moved runs) are worded in
`templates/<platform>/_said.j2` and said through `core.render.sentence`, escaped like replies."""

from __future__ import annotations

from adapters.discord.formatting import FORMAT as DISCORD
from adapters.slack.formatting import FORMAT
from core.render import sentence


def test_slack_says_its_mechanics_from_templates_with_untrusted_text_escaped() -> None:
    chose = FORMAT.said("chose", "<!here> *Ana*", "Approve")
    assert chose == "✔ &lt;!here&gt; \u2217Ana\u2217 chose *Approve*"
    assert FORMAT.said("uploaded", 12345, "log.txt") == (
        "The full text (12,345 characters) is too long for a Slack message; "
        "it is attached in this thread as `log.txt`.")
    cause, step = FORMAT.said("started_unseen", "r<1>", "channel_not_found").split("\n")
    assert cause == ("Run `r&lt;1&gt;` started, but Baton's message about it did not get through "
                     "(channel_not_found).")
    assert step == "Do not start it again: `/workflow status r&lt;1&gt;` shows how it is doing."
    assert FORMAT.said("cannot_post", "group_dm", "G1").startswith(
        "Nothing was started: Baton cannot post in this group direct message: Slack does not let")


def test_discord_says_where_a_moved_run_reports() -> None:
    assert sentence(DISCORD, "moved", "r1", "direct") == (
        "Baton could not post in the thread of run `r1` (deleted, or no access); "
        "it reports that run in a direct message from now on.")
    assert sentence(DISCORD, "moved", "r1", "1234").endswith("in this channel from now on.")
