"""Typed text never becomes code in a `bash:` step, whatever quoting the author used.

Property tests run real bash: arbitrary text (quotes, `$()`, backticks, newlines, unicode,
heredoc delimiters) in every quoting context either reaches the program exactly as typed, or
the placeholder is refused at load; never is a marker file created.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from jinja2.filters import do_int

from core.errors import TemplateRenderError
from core.workflows.bash_template import bash_plan, render_bash
from core.workflows.shell_context import Reason

MARK = "MARK"
ATTACKS = [
    f"$(touch {MARK})",
    f"`touch {MARK}`",
    f"'; touch {MARK}; '",
    f'"; touch {MARK}; "',
    f"\ntouch {MARK}\n",
    f"EOF\ntouch {MARK}\nEOF",
    f"a[$(touch {MARK})]",
    f"${{x:-$(touch {MARK})}}",
    f"\\$(touch {MARK})",
    f"$'\\x27'; touch {MARK}",
    "${BATON_ARG_1}",
    '"$BATON_ARG_1"',
    "*",
    "~",
    "-n",
    "",
]
typed = st.one_of(
    st.sampled_from(ATTACKS),
    st.text(alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), max_size=40),
    st.lists(
        st.sampled_from([*ATTACKS, " ", "'", '"', "\\", "\n", "é", "🎉", "$", "(", ")", "`"]), max_size=6
    ).map("".join),
)

#: (template, what `out` holds afterwards given the value v): contexts that must be accepted
ACCEPTED: list[tuple[str, str]] = [
    ("printf '%s' {{ inputs.v }} > out", "{v}"),
    ("printf '%s' \"{{ inputs.v }}\" > out", "{v}"),
    ("printf '[%s]' \"pre {{ inputs.v }} post\" > out", "[pre {v} post]"),
    ("printf '%s' x{{ inputs.v }}y > out", "x{v}y"),
    ("cat > out <<EOF\n{{ inputs.v }}\nEOF", "{v}\n"),
    ("cat > out <<-EOF\n\tbefore {{ inputs.v }} after\n\tEOF", "before {v} after\n"),
    ("cat <<EOF\n$(printf '%s' {{ inputs.v }} > out)\nEOF", "{v}"),
    (": \"$(printf '%s' {{ inputs.v }} > out)\"", "{v}"),
    ("x={{ inputs.v }}; printf '%s' \"$x\" > out", "{v}"),
    ("export X={{ inputs.v }} && printf '%s' \"$X\" > out", "{v}"),
    ("case {{ inputs.v }} in *) printf '%s' {{ inputs.v }} > out;; esac", "{v}"),
    ("for w in {{ inputs.v }}; do printf '%s' \"$w\" > out; done", "{v}"),
    ('bash -c \'printf "%s" "$1" > out\' _ {{ inputs.v }}', "{v}"),
    ("[[ -n {{ inputs.v }} || -z {{ inputs.v }} ]] && printf '%s' {{ inputs.v }} > out", "{v}"),
    ("cat <(printf '%s' {{ inputs.v }}) > out", "{v}"),
    ("arr=( {{ inputs.v }} ); printf '%s' \"${arr[0]}\" > out", "{v}"),
    (': "$(printf \'%s\' "{{ inputs.v }}" > out)"', "{v}"),
    ("# a comment: it's {{ inputs.v }}\nprintf '%s' {{ inputs.v }} > out", "{v}"),
    ("awk -v x={{ inputs.v }} 'BEGIN{printf \"ok\"}' > out", "ok"),
    ("printf '%s' \"{% if inputs.v %}{{ inputs.v }}{% endif %}\" > out", "{v}"),
    ("printf '%s,' {% for i in [1, 2] %}{{ inputs.v }} {% endfor %} > out", "{v},{v},"),
]

#: contexts that must be refused at load, whatever the value
REFUSED: list[tuple[str, Reason]] = [
    ("echo '{{ inputs.v }}'", Reason.SINGLE_QUOTES),
    ("echo $'{{ inputs.v }}'", Reason.ANSI_QUOTES),
    ("echo `echo {{ inputs.v }}`", Reason.BACKTICKS),
    ('echo "`echo {{ inputs.v }}`"', Reason.BACKTICKS),
    ("echo ${x:-{{ inputs.v }}}", Reason.PARAMETER),
    ("echo $(( {{ inputs.v }} + 1 ))", Reason.ARITHMETIC),
    ("(( {{ inputs.v }} > 1 ))", Reason.ARITHMETIC),
    ("echo $[ {{ inputs.v }} ]", Reason.ARITHMETIC),
    ("a[{{ inputs.v }}]=1", Reason.SUBSCRIPT),
    ("[[ {{ inputs.v }} -eq 1 ]]", Reason.CONDITION),
    ("[[ -v {{ inputs.v }} ]]", Reason.CONDITION),
    ("cat <<'EOF'\n{{ inputs.v }}\nEOF", Reason.QUOTED_HEREDOC),
    ('cat <<"EOF"\n{{ inputs.v }}\nEOF', Reason.QUOTED_HEREDOC),
    ("cat <<\\EOF\n{{ inputs.v }}\nEOF", Reason.QUOTED_HEREDOC),
    ("cat <<{{ inputs.v }}\nx\n", Reason.HEREDOC_DELIMITER),
    ("bash <<EOF\necho {{ inputs.v }}\nEOF", Reason.CODE_HEREDOC),
    ("cat <<EOF | sh\necho {{ inputs.v }}\nEOF", Reason.CODE_HEREDOC),
    ("echo ${{ inputs.v }}", Reason.AFTER_DOLLAR),
    ('echo "${{ inputs.v }}"', Reason.AFTER_DOLLAR),
    ("echo \\{{ inputs.v }}", Reason.AFTER_BACKSLASH),
    ('echo "\\{{ inputs.v }}"', Reason.AFTER_BACKSLASH),
    ("{{ inputs.v }} --version", Reason.COMMAND_NAME),
    ("echo ok; {{ inputs.v }}", Reason.COMMAND_NAME),
    ("X=1 {{ inputs.v }}", Reason.COMMAND_NAME),
    ('eval "echo {{ inputs.v }}"', Reason.EVAL),
    ("eval echo {{ inputs.v }}", Reason.EVAL),
    ("trap 'x' {{ inputs.v }}", Reason.EVAL),
    ("let x={{ inputs.v }}", Reason.EVAL),
    ("declare -i n={{ inputs.v }}", Reason.EVAL),
    ("ssh host echo {{ inputs.v }}", Reason.EVAL),
    ('bash -c "echo {{ inputs.v }}"', Reason.CODE_STRING),
    ('sh -ec "echo {{ inputs.v }}"', Reason.CODE_STRING),
    ("python3 -c \"print('{{ inputs.v }}')\"", Reason.CODE_STRING),
    ('awk "BEGIN{print {{ inputs.v }}}"', Reason.CODE_STRING),
    ('sed "s/a/{{ inputs.v }}/"', Reason.CODE_STRING),
    ("read {{ inputs.v }}", Reason.VARIABLE_NAME),
    ("printf -v {{ inputs.v }} x", Reason.VARIABLE_NAME),
    ("export {{ inputs.v }}", Reason.VARIABLE_NAME),
    ('echo {% if inputs.v %}"{% endif %}{{ inputs.v }}', Reason.BLOCK),
]

#: Forms that loaded and ran typed text as code before issue 25 (each with a value that shows
#: it: `test_each_new_form_would_run_typed_text_if_it_were_not_refused`), refused at load now.
NEW_FORMS: list[tuple[str, Reason, str]] = [
    ("bash <<< {{ inputs.v }}", Reason.STDIN_CODE, f"touch {MARK}"),
    ("cat <<< {{ inputs.v }} | sh", Reason.STDIN_CODE, f"touch {MARK}"),
    ("echo {{ inputs.v }} | sh", Reason.STDIN_CODE, f"touch {MARK}"),
    ("echo {{ inputs.v }} | bash", Reason.STDIN_CODE, f"touch {MARK}"),
    ("printf '%s' {{ inputs.v }} | tr x y | bash -s", Reason.STDIN_CODE, f"touch {MARK}"),
    ("echo {{ inputs.v }} |& bash", Reason.STDIN_CODE, f"touch {MARK}"),
    ("echo {{ inputs.v }} | python3", Reason.STDIN_CODE, f"open('{MARK}', 'w')"),
    ("echo {{ inputs.v }} | python3 -", Reason.STDIN_CODE, f"open('{MARK}', 'w')"),
    ("echo {{ inputs.v }} | bash /dev/stdin", Reason.STDIN_CODE, f"touch {MARK}"),
    ("echo {{ inputs.v }} | xargs bash -c", Reason.STDIN_CODE, f"touch${{IFS}}{MARK}"),
    ("{ echo {{ inputs.v }}; } | bash", Reason.STDIN_CODE, f"touch {MARK}"),
    ('echo "$(echo {{ inputs.v }})" | bash', Reason.STDIN_CODE, f"touch {MARK}"),
    ("bash < <(echo {{ inputs.v }})", Reason.STDIN_CODE, f"touch {MARK}"),
    # a code string that runs its own input (found by the any-script property with a new draw)
    ("bash -c bash -c <<< {{ inputs.v }}", Reason.STDIN_CODE, f"touch {MARK}"),
    ("echo {{ inputs.v }} | sh -c 'cat | sh'", Reason.STDIN_CODE, f"touch {MARK}"),
    ("echo {{ inputs.v }} | bash -c 'exec \"$0\"' sh", Reason.STDIN_CODE, f"touch {MARK}"),
    ("python3 -c 'exec(input())' <<< {{ inputs.v }}", Reason.STDIN_CODE, f"open('{MARK}', 'w')"),
    ('v={{ inputs.v }}; echo "${!v}"', Reason.INDIRECT, f"a[$(touch {MARK})]"),
    ('v={{ inputs.v }}; echo "${v@P}"', Reason.INDIRECT, f"$(touch {MARK})"),
    ("n={{ inputs.v }}; echo $(( n + 1 ))", Reason.ARITHMETIC, f"a[$(touch {MARK})]"),
    ("n={{ inputs.v }}; echo $(( $n + 1 ))", Reason.ARITHMETIC, f"a[$(touch {MARK})]"),
    ("n={{ inputs.v }}; (( n > 1 ))", Reason.ARITHMETIC, f"a[$(touch {MARK})]"),
    ("n={{ inputs.v }}; [[ $n -eq 1 ]]", Reason.CONDITION, f"a[$(touch {MARK})]"),
    ("k={{ inputs.v }}; a=(1 2); echo ${a[k]}", Reason.PARAMETER, f"b[$(touch {MARK})]"),
    ("read -r n <<< {{ inputs.v }}; echo $(( n ))", Reason.ARITHMETIC, f"a[$(touch {MARK})]"),
    ("timeout 5 {{ inputs.v }} " + MARK, Reason.COMMAND_NAME, "touch"),
    ("timeout -s KILL 5 {{ inputs.v }} " + MARK, Reason.COMMAND_NAME, "touch"),
    ("nice -n 5 {{ inputs.v }} " + MARK, Reason.COMMAND_NAME, "touch"),
    ("xargs -0 {{ inputs.v }} " + MARK + " < /dev/null", Reason.COMMAND_NAME, "touch"),
    ("exec {{ inputs.v }} " + MARK, Reason.COMMAND_NAME, "touch"),
    ("v={{ inputs.v }}; $v " + MARK, Reason.COMMAND_NAME, "touch"),
    ("for w in {{ inputs.v }}; do \"$w\" " + MARK + "; done", Reason.COMMAND_NAME, "touch"),
    ("$(printf '%s' {{ inputs.v }}) " + MARK, Reason.COMMAND_NAME, "touch"),
    ('bash -c "$(echo {{ inputs.v }})"', Reason.CODE_STRING, f"touch {MARK}"),
    ('x={{ inputs.v }}; y=$x; eval "$y"', Reason.EVAL, f"touch {MARK}"),
    ("env -S {{ inputs.v }}", Reason.EVAL, f"touch {MARK}"),
    ("bash {{ inputs.v }}", Reason.SCRIPT, "evil.sh"),
    ("sh {{ inputs.v }}", Reason.SCRIPT, "evil.sh"),
    ("bash <(echo {{ inputs.v }})", Reason.SCRIPT, f"touch {MARK}"),
    ("source {{ inputs.v }}", Reason.EVAL, "evil.sh"),
    (". {{ inputs.v }}", Reason.EVAL, "evil.sh"),
    ("source <(echo {{ inputs.v }})", Reason.EVAL, f"touch {MARK}"),
]
REFUSED += [(template, reason) for template, reason, _ in NEW_FORMS]


def _run(template: str, value: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    command = render_bash(template, {"inputs": {"v": value}})
    return subprocess.run(
        ["bash", "-c", command.text],
        cwd=cwd,
        env={"PATH": os.environ["PATH"], **command.variables},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=10,
    )


@pytest.mark.parametrize(("template", "expected"), ACCEPTED)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=typed)
def test_accepted_contexts_deliver_exactly_the_typed_text(
    template: str, expected: str, value: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    if template.startswith("cat > out <<-") and value.startswith("\t"):
        value = value.lstrip("\t") or "x"  # (only the literal line's tabs are stripped)
    cwd = tmp_path_factory.mktemp("bash")
    assert not bash_plan(template).refused
    result = _run(template, value, cwd)
    assert result.returncode == 0, result.stderr
    assert not (cwd / MARK).exists()
    assert (cwd / "out").read_bytes().decode() == expected.replace("{v}", value)


@pytest.mark.parametrize(("template", "reason"), REFUSED)
def test_unsafe_contexts_are_refused_at_load(template: str, reason: Reason) -> None:
    refused = bash_plan(template).refused
    assert refused, template
    assert refused[0].reason == reason.what
    assert refused[0].line >= 1
    with pytest.raises(TemplateRenderError):
        render_bash(template, {"inputs": {"v": "x"}})


def _unprotected(template: str) -> str:
    """The command as Baton wrote it before issue 25: each placeholder a quoted reference."""
    return template.replace('"$(echo {{ inputs.v }})"', '"$(echo "$BATON_ARG_1")"').replace(
        "{{ inputs.v }}", '"$BATON_ARG_1"'
    )


@pytest.mark.parametrize(("template", "reason", "value"), NEW_FORMS)
def test_each_new_form_is_refused_and_nothing_typed_runs(
    template: str, reason: Reason, value: str, tmp_path: Path
) -> None:
    (tmp_path / "evil.sh").write_text(f"touch {MARK}\n")  # a script the typed text could name
    refused = bash_plan(template).refused
    assert [r.reason for r in refused][:1] == [reason.what], (template, refused)
    assert refused[0].line == 1 and refused[0].fix == reason.fix
    with pytest.raises(TemplateRenderError):  # the step never gets a command to run
        _run(template, value, tmp_path)
    assert not (tmp_path / MARK).exists()


@pytest.mark.parametrize(("template", "reason", "value"), NEW_FORMS)
def test_each_new_form_would_run_typed_text_if_it_were_not_refused(
    template: str, reason: Reason, value: str, tmp_path: Path
) -> None:
    # the control: run as Baton ran it before, the typed value does run (so the refusal matters)
    (tmp_path / "evil.sh").write_text(f"touch {MARK}\n")
    env = {"PATH": os.environ["PATH"], "BATON_ARG_1": value}
    subprocess.run(["bash", "-c", _unprotected(template)], cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
                   capture_output=True, timeout=10, check=False)
    assert (tmp_path / MARK).exists(), template


#: numbers made in the template are fine in arithmetic: the value is always an integer
NUMERIC_ACCEPTED = [
    "printf '%s' $(( {{ inputs.v | int }} + 1 )) > out",
    "n={{ inputs.v | int }}; printf '%s' $(( n + 1 )) > out",
    "a=(0 0); a[{{ inputs.v | int }} % 2]=5; printf '%s' $(( {{ inputs.v | int }} + 1 )) > out",
    "[[ {{ inputs.v | int }} -ge -99999 ]] && printf '%s' $(( {{ inputs.v | int }} + 1 )) > out",
]


#: what bash's arithmetic holds: 64-bit signed integers, wrapping past the ends
BASH_MIN, BASH_MAX = -(2**63), 2**63 - 1


def _bash_wrap(number: int) -> int:
    return (number - BASH_MIN) % 2**64 + BASH_MIN


@pytest.mark.parametrize("template", NUMERIC_ACCEPTED)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.one_of(typed, st.integers(-9999, 9999).map(str), st.integers(-(2**65), 2**65).map(str)))
@example(value=str(2**63 - 1))  # bash holds it; the template's own `+ 1` wraps, as bash does
@example(value=str(2**63))  # `| int` makes a number bash cannot hold: a render error, not a wrap
@example(value=str(-(2**63) - 1))
@example(value="1e30")
def test_a_number_made_in_the_template_may_stand_in_arithmetic(
    template: str, value: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    cwd = tmp_path_factory.mktemp("num")
    assert not bash_plan(template).refused, template
    number = do_int(value)  # jinja's `int`: "42.9" is 42, anything not a number 0
    if not BASH_MIN <= number <= BASH_MAX:  # bash would read another number: the step never runs
        with pytest.raises(TemplateRenderError, match=f"gives {number}, a number bash cannot hold"):
            _run(template, value, cwd)
        return
    result = _run(template, value, cwd)
    assert not (cwd / MARK).exists()
    if "-ge -99999" in template and number < -99999:  # the condition is false: nothing printed
        assert result.returncode == 1 and not (cwd / "out").exists(), result.stderr
        return
    assert result.returncode == 0, result.stderr
    assert (cwd / "out").read_text() == str(_bash_wrap(number + 1))


FRAGMENTS = [
    "echo ",
    "printf '%s' ",
    " ",
    "\n",
    ";",
    "|",
    "&&",
    "'",
    '"',
    "`",
    "$(",
    ")",
    "$((",
    "))",
    "${",
    "}",
    "\\",
    "#",
    "cat <<EOF\n",
    "\nEOF\n",
    "<<'EOF'\n",
    "x=",
    "[[ ",
    " ]]",
    " -eq ",
    "case ",
    " in ",
    "*) ",
    ";; esac",
    "eval ",
    "bash -c ",
    "sh -c ",
    "(",
    "{ ",
    "; }",
    "a[",
    "]",
    "$",
    "{% if inputs.v %}",
    "{% endif %}",
    "{% for i in [1, 2] %}",
    "{% endfor %}",
    "x",
    "-c",
    "'EOF'",
    "<(",
    ">",
    "| sh",
    "| bash",
    " <<< ",
    "timeout 5 ",
    "v=",
    '"${!v}"',
    "$v",
    "$(( v ))",
    "bash ",
    "source ",
]


@st.composite
def scripts(draw: st.DrawFn) -> str:
    parts = draw(st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.just("{{ inputs.v }}")), max_size=14))
    text = "".join(parts)
    depth = 0
    balanced: list[str] = []
    for token in _jinja_blocks(text):  # keep jinja's own blocks well formed
        if token.startswith("{% if") or token.startswith("{% for"):
            depth += 1
        elif token.startswith("{% end"):
            if depth == 0:
                continue
            depth -= 1
        balanced.append(token)
    ends = []
    for token in balanced:
        if token.startswith("{% if"):
            ends.append("{% endif %}")
        elif token.startswith("{% for"):
            ends.append("{% endfor %}")
        elif token.startswith("{% end"):
            ends.pop()
    return "".join(balanced) + "".join(reversed(ends)) + "{{ inputs.v }}" * draw(st.integers(0, 1))


def _jinja_blocks(text: str) -> list[str]:
    tokens: list[str] = []
    i = 0
    while i < len(text):
        end = text.find("%}", i) if text.startswith("{%", i) else -1
        if end >= 0:
            tokens.append(text[i : end + 2])
            i = end + 2
        else:
            tokens.append(text[i])
            i += 1
    return tokens


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(script=scripts(), value=st.sampled_from(ATTACKS))
def test_any_script_either_refuses_the_placeholder_or_never_runs_the_typed_text(
    script: str, value: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    try:
        plan = bash_plan(script)
    except Exception:  # not valid jinja: the loader reports a syntax error
        return
    if plan.refused:
        return
    cwd = tmp_path_factory.mktemp("any")
    _run(script, value, cwd)
    assert not (cwd / MARK).exists(), script
