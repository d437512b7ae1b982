"""`options.spell`: typed values -> the chat command they stand for, quoted as the parser reads it."""

from __future__ import annotations

from core.commands.options import TYPED, spell
from core.commands.parser import parse


def test_run_spells_flags_before_the_message_and_quotes_what_needs_it() -> None:
    values = {"name": "deploy", "message": "v2 now", "set": 'a=1 b="x y"', "force": True}
    assert spell(TYPED["run"], values) == 'run deploy --force --set a=1 --set "b=x y" "v2 now"'


def test_absent_and_empty_optional_values_are_left_out() -> None:
    assert spell(TYPED["status"], {}) == "status"
    assert spell(TYPED["approve"], {"run": "3f9a", "comment": ""}) == "approve 3f9a"
    assert spell(TYPED["resolve"], {"run": "3f9a", "node": "n", "action": "done", "output": ""}) == \
        'resolve 3f9a n done --output ""'


def test_an_unbalanced_quote_in_set_is_left_for_the_parser_to_refuse() -> None:
    assert spell(TYPED["run"], {"name": "w", "set": 'a="b'}) == 'run w --set a="b'


def test_do_takes_the_command_verbatim_and_spelled_commands_parse() -> None:
    assert spell(TYPED["do"], {"command": "approve 3f9a -- lgtm"}) == "approve 3f9a -- lgtm"
    assert parse(spell(TYPED["invalidate"], {"run": "3f9a", "node": "draft", "downstream": True}))


def test_every_command_and_option_fits_a_command_picker() -> None:
    """Discord refuses a whole command sync when one description is over 100 characters
    (`approve`'s summary is 158): pickers show each summary's brief form."""
    from core.commands.model import BRIEF_LIMIT, SPECS
    from core.commands.options import TYPED

    for typed in TYPED.values():
        assert 1 <= len(typed.describe) <= BRIEF_LIMIT, typed.name
        assert all(1 <= len(o.describe) <= BRIEF_LIMIT for o in typed.options), typed.name
    assert TYPED["approve"].describe == "approve the waiting gate"
    assert SPECS["approve"].brief == "approve the waiting gate"
    assert SPECS["run"].brief == SPECS["run"].summary  # a short summary is shown whole
