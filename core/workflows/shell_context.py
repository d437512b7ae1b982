r"""Where a `{{ }}` sits in a bash command: a small lexer of bash's quoting contexts.

A `bash:` step never has a value spliced into its script. Each placeholder becomes a reference
to an environment variable that holds the value (`core/workflows/bash_template.py`); this
module decides which reference fits where the author put the placeholder, or refuses it:

    bare word           echo {{ x }}          ->  echo "$BATON_ARG_1"
    double quotes       echo "a {{ x }}"      ->  echo "a ${BATON_ARG_1}"
    unquoted heredoc    cat <<EOF … {{ x }}   ->  … ${BATON_ARG_1} …
    $( ), <( ), >( )    the same rules inside, with their own quoting

Bash never parses the result of an expansion again, so in those places the value reaches the
program exactly as typed. Everywhere else the loader refuses the placeholder (`Reason`):
where nothing expands (single quotes, `$'…'`, a quoted heredoc), where the result would be
re-read as code (backticks, `${…}`, arithmetic, array subscripts, `[[ … -eq … ]]`, the command
name, `eval`/`source`/`trap`/`let`/`alias`, a shell's `-c` string, an interpreter's program,
the body of a heredoc fed to an interpreter, `ssh`/`su`/`watch`, variable names given to
`read`/`unset`/`printf -v`/…, `declare -i`), and right after `$` or `\`.

Typed text is followed beyond the placeholder: a variable assigned from one (`v={{ x }}`,
`for v in …`, `read v`) and a `$( )` / `<( )` that prints one hold typed text, and each use of
them (`$v`, `${v…}`, `v` in arithmetic, the substitution's place) is decided like a
placeholder standing there; `${!v}` and `${v@P}` are refused (`INDIRECT`). What reaches the
standard input of a program that runs its input (`| sh`, `bash <<<`, `python3 < file`,
`| xargs bash -c`) is refused when that command ends (`STDIN_CODE`); an interpreter's script
(`bash {{ x }}`) is `SCRIPT`; after a wrapper (`timeout 5`, `sudo -u u`, `_WRAPPERS`) the
command name is found past its options and operands. A number made in the template
(`{{ x | int }}`, `NUMERIC_FILTERS`) may stand in arithmetic.

The command-level checks recognise the usual spellings; a program that runs its arguments as
code in another way (`make`, `find -exec`, a script written to a file and run later) stays
the author's responsibility (docs/workflows.md). The lexer is fed literal text and
placeholders in order (`feed`, `placeholder`); `clone` and `key` let the template walker
follow `{% if %}`/`{% for %}` paths.
"""

from __future__ import annotations

import copy
import enum
import re
from collections.abc import Hashable
from dataclasses import dataclass, field


class Form(enum.Enum):
    """How a placeholder is written into the script."""

    BARE = "bare"  # "$BATON_ARG_n": a whole word (or part of one), quoted
    DOUBLE = "double"  # ${BATON_ARG_n}: already inside double quotes or a heredoc body


class Reason(enum.Enum):
    """Why a placeholder is refused: (what happens there, how to fix it)."""

    SINGLE_QUOTES = (
        "is inside single quotes, where nothing is replaced",
        "Close the single quotes around it: 'text '{{ x }}' more text'.",
    )
    ANSI_QUOTES = (
        "is inside $'…' quotes, where nothing is replaced",
        "Close the $'…' quotes around it and put {{ x }} outside them.",
    )
    BACKTICKS = (
        "is inside backticks, whose text bash reads again",
        "Use $( … ) instead of backticks.",
    )
    PARAMETER = (
        "is inside ${…}, where bash reads it as part of the expansion",
        "Assign it to a variable first (v={{ x }}) and use ${v…}.",
    )
    ARITHMETIC = (
        "is inside an arithmetic expression, which bash evaluates as code",
        "Make it a number in the template: $(( {{ x | int }} + 1 )), or n={{ x | int }} then $n.",
    )
    SUBSCRIPT = (
        "is an array subscript, which bash evaluates as code",
        "Make it a number in the template: a[{{ x | int }}]; to look up by name, use case \"$k\" in ….",
    )
    CONDITION = (
        "is an operand of [[ … -eq/-lt/… ]] or -v, which bash evaluates as code",
        'Make it a number in the template ({{ x | int }}), or compare with [ "$n" -eq … ].',
    )
    QUOTED_HEREDOC = (
        "is inside a heredoc with a quoted delimiter, where nothing is replaced",
        "Unquote the heredoc delimiter (<<EOF instead of <<'EOF') or move {{ x }} out of it.",
    )
    HEREDOC_DELIMITER = (
        "is a heredoc delimiter",
        "Write the delimiter literally (<<EOF).",
    )
    CODE_HEREDOC = (
        "is inside a heredoc that an interpreter runs as code",
        "Pass the value as an argument or environment variable of the program instead.",
    )
    AFTER_DOLLAR = (
        "follows a `$`, which would turn it into a different expansion",
        "Put a space or quote between `$` and {{ x }}, or drop the `$`.",
    )
    AFTER_BACKSLASH = (
        "follows a backslash, which would escape its expansion",
        "Remove the backslash before {{ x }}.",
    )
    COMMAND_NAME = (
        "is the name of the command to run, so typed text would choose the program",
        'Run a fixed command and pass the value as an argument (case "$x" in …) to choose.',
    )
    EVAL = (
        "is given to a command that runs its arguments as shell code",
        "Pass it as an argument instead: bash -c '… \"$1\" …' _ {{ x }}.",
    )
    CODE_STRING = (
        "is part of a program text (a shell's -c, an interpreter's -c/-e, awk or sed script)",
        "Pass it as an argument instead: bash -c '… \"$1\" …' _ {{ x }}.",
    )
    VARIABLE_NAME = (
        "is a variable name, which bash can evaluate as code",
        "Use a fixed variable name and pass {{ x }} as the value.",
    )
    SCRIPT = (
        "is the script, module or file an interpreter runs, so typed text would choose the code",
        "Run a fixed script and pass the value as its argument: bash ./deploy.sh {{ x }}.",
    )
    STDIN_CODE = (
        "reaches the input of a program that runs its input as code (| sh, bash <<<, python3 <)",
        "Pass it as an argument of a fixed script instead: bash -c '… \"$1\" …' _ {{ x }}.",
    )
    INDIRECT = (
        "is read through ${!…} or ${…@P}, which take the value as a variable name or as code",
        'Use the value itself ("$v"), or choose among fixed names with case "$v" in ….',
    )
    BLOCK = (
        "sits where the quoting depends on a {% if %}/{% for %} block",
        "Keep quotes balanced inside each block, or build the text with a filter (| join(' ')).",
    )

    @property
    def what(self) -> str:
        return self.value[0]

    @property
    def fix(self) -> str:
        return self.value[1]


#: contexts where an integer is fine (`{{ x | int }}`): arithmetic, subscripts, `[[ -eq ]]`
_NUMBER_ONLY = (Reason.ARITHMETIC, Reason.SUBSCRIPT, Reason.CONDITION)


@dataclass(frozen=True)
class Placement:
    """The decision for one placeholder: a form, or a reason to refuse it."""

    form: Form | None = None
    reason: Reason | None = None


_ARITH_CONDITIONS = frozenset({"-eq", "-ne", "-lt", "-le", "-gt", "-ge"})
_EVALS = frozenset({"eval", "source", ".", "trap", "let", "alias"})
_REMOTE = frozenset({"ssh", "su", "watch", "runuser"})
_NAMES = frozenset({"read", "unset", "mapfile", "readarray", "getopts", "wait"})
_DECLARES = frozenset({"declare", "typeset", "local", "readonly", "export"})
#: interpreter -> regex of the flag whose next word is program text
_CODE_FLAGS: dict[str, re.Pattern[str]] = {
    **{
        sh: re.compile(r"^-[A-Za-z]*c[A-Za-z]*$")
        for sh in ("bash", "sh", "dash", "zsh", "ksh", "ash", "mksh")
    },
    **{py: re.compile(r"^-[A-Za-z]*c$") for py in ("python", "python3", "python2", "pypy3")},
    "perl": re.compile(r"^-[A-Za-z]*[eE]$"),
    "ruby": re.compile(r"^-[A-Za-z]*e$"),
    "node": re.compile(r"^(-[ep]|--eval|--print)$"),
    "php": re.compile(r"^-r$"),
}
#: interpreters whose first operand is the program (awk 'prog', sed 'script')
_PROGRAM_FIRST = frozenset({"awk", "gawk", "mawk", "nawk", "sed", "jq"})
#: options of those interpreters followed by a value (not program text): how many words
_OPTION_VALUES: dict[str, int] = {
    "-v": 1,
    "-F": 1,
    "--arg": 2,
    "--argjson": 2,
    "--slurpfile": 2,
    "--rawfile": 2,
    "-l": 1,
    "--indent": 1,
}
_PROGRAM_FILES = frozenset({"-f", "--from-file", "--file"})
#: a heredoc fed to one of these is code
_HEREDOC_CODE = frozenset(_CODE_FLAGS) | _PROGRAM_FIRST | _REMOTE | _EVALS
_SHELLS = frozenset({"bash", "sh", "dash", "zsh", "ksh", "ash", "mksh"})
#: what, in another language's code string, may run what the program reads: its input then
#: counts as code (`python3 -c 'exec(input())' <<< {{ x }}`)
_RUNS_TEXT = ("exec", "eval", "compile", "system", "popen", "subprocess", "spawn", "__import__",
              "runpy", "Function", "require", "load", "do ", "`", "qx", "%x", "shell")  # fmt: skip


def _code_may_run_stdin(interp: str, code: str) -> bool:
    """Whether an interpreter's code string (`bash -c CODE`) may run what reaches its standard
    input: a shell's code names a program that runs its input, an eval, or takes its program
    from its arguments (`bash -c bash <<< …`, `sh -c 'cat | sh'`, `bash -c 'exec "$0"' sh`);
    another language's code names a way to run text. Unsure counts as yes: typed text on such
    a command's input is refused."""
    if interp in _SHELLS:
        if "$" in code:
            return True
        words = {w.rsplit("/", 1)[-1] for w in re.split(r"[\s;|&(){}`'\"<>]+", code) if w}
        return bool(words & (_STDIN_CODE | _EVALS | _REMOTE | _PROGRAM_FIRST | set(_WRAPPERS) | _STDIN_FILES))
    return any(marker in code for marker in _RUNS_TEXT)


@dataclass(frozen=True)
class _Wrapper:
    """A program that runs the command given after its options and operands (`timeout 5 cmd`)."""

    values: frozenset[str] = frozenset()  # options followed by a value
    operands: int = 0  # words before the command (timeout's duration, chroot's directory)
    code: frozenset[str] = frozenset()  # options after which the rest is shell code (sudo -s)


def _wrapper(values: str = "", operands: int = 0, code: str = "") -> _Wrapper:
    return _Wrapper(frozenset(values.split()), operands, frozenset(code.split()))


#: wrappers: the first word after their options and operands is the command name
_WRAPPERS: dict[str, _Wrapper] = {
    "command": _wrapper(), "builtin": _wrapper(), "exec": _wrapper("-a"), "nohup": _wrapper(),
    "setsid": _wrapper(), "unshare": _wrapper("--propagation --setgroups -S --setuid -G --setgid"),
    "time": _wrapper("-f --format -o --output"), "busybox": _wrapper(), "fakeroot": _wrapper(),
    "nice": _wrapper("-n --adjustment"), "ionice": _wrapper("-c --class -n --classdata -p --pid -P -u"),
    "timeout": _wrapper("-s --signal -k --kill-after", operands=1),
    "sudo": _wrapper("-u --user -g --group -C --close-from -D --chdir -h --host -p --prompt -r --role "
                     "-t --type -U --other-user -T --command-timeout", code="-s --shell -i --login"),
    "doas": _wrapper("-u -C", code="-s"),
    "env": _wrapper("-u --unset -C --chdir", code="-S --split-string"),
    "xargs": _wrapper("-I -L -n -P -s -d -E -a --max-args --max-procs --max-lines --delimiter --eof "
                      "--arg-file --replace --max-chars --process-slot-var"),
    "stdbuf": _wrapper("-i -o -e --input --output --error"),
    "taskset": _wrapper(operands=1), "chrt": _wrapper(operands=1), "faketime": _wrapper(operands=1),
    "flock": _wrapper("-w --timeout -E --conflict-exit-code", operands=1, code="-c --command"),
    "chroot": _wrapper("--userspec --groups", operands=1),
    "strace": _wrapper("-o -e -p -s -u -E -a -b -I -O -P -S -X"), "ltrace": _wrapper("-o -e -p -s -u -n"),
    "nsenter": _wrapper("-t --target -S --setuid -G --setgid"), "runcon": _wrapper("-u -r -t -l"),
    "sg": _wrapper(operands=1, code="-c"), "script": _wrapper("-E -I -O -T -t", code="-c --command"),
    "systemd-run": _wrapper("-p --property -u --unit -E --setenv --uid --gid -d --working-directory"),
}  # fmt: skip
#: words after which the next word is a command name again
_PREFIXES = frozenset({"!", "if", "then", "else", "elif", "while", "until", "do", "{", "coproc", *_WRAPPERS})
#: interpreters that run their standard input when no program was given (`| sh`, `python3 -`)
_STDIN_CODE = frozenset(_CODE_FLAGS)
#: a program given as one of these files is the standard input
_STDIN_FILES = frozenset({"/dev/stdin", "/dev/fd/0", "/proc/self/fd/0", "-"})
#: filters whose result is always an integer: such a placeholder may stand in arithmetic
NUMERIC_FILTERS = frozenset({"int", "length", "count"})
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PARAM_HEAD = re.compile(r"([!#]?)([A-Za-z_][A-Za-z0-9_]*)")
_KEY_WORD_CHARS = 24  # longer words are never keywords: their text stops mattering
_PH = "\x00"  # stands for a placeholder inside tracked word text


@dataclass
class _Heredoc:
    delimiter: str
    quoted: bool
    strip_tabs: bool
    code: bool  # fed to an interpreter


# -- frames: one quoting context each, a class per kind ------------------------------------------


@dataclass
class _Double:
    """Inside `"…"`: `$`, backquotes and backslashes are special."""

    def key(self) -> Hashable:
        return ("dq",)


@dataclass
class _Single:
    """Inside `'…'`: nothing is special but the closing quote."""

    def key(self) -> Hashable:
        return ("sq",)


@dataclass
class _Ansi:
    """Inside `$'…'`: backslash escapes."""

    def key(self) -> Hashable:
        return ("ansi",)


@dataclass
class _Backticks:
    """Inside a `` `…` `` command substitution."""

    def key(self) -> Hashable:
        return ("bq",)


@dataclass
class _Param:
    """Inside `${…}`."""

    depth: int = 0  # braces opened inside
    in_dq: bool = False  # opened inside double quotes

    def key(self) -> Hashable:
        return ("param", self.depth, self.in_dq)


@dataclass
class _Arith:
    """Inside `$(( ))`, `(( ))` (closer `)`) or `$[ ]` (closer `]`)."""

    closer: str
    depth: int = 0  # parens opened inside

    def key(self) -> Hashable:
        return ("arith", self.closer, self.depth)


@dataclass
class _Subscript:
    """Inside an array subscript `a[…]`."""

    depth: int = 0  # brackets opened inside

    def key(self) -> Hashable:
        return ("subscript", self.depth)


@dataclass
class _Body:
    """A heredoc's body, up to its delimiter line."""

    heredoc: _Heredoc

    def key(self) -> Hashable:
        h = self.heredoc
        return ("body", h.delimiter, h.quoted, h.strip_tabs, h.code)


@dataclass
class _Cmd:
    """Commands: the script itself, `$( )`, `<( )` and `>( )`, an array literal `a=( … )`."""

    closer: str = ""  # ")" for $( ), <( ) and a=( )
    depth: int = 0  # parens opened inside
    # -- the simple command being read ---------------------------------------------------------
    comment: bool = False
    in_word: bool = False
    word: str = ""  # the current word's text (quotes kept), up to _KEY_WORD_CHARS
    long_word: bool = False
    cmd_pos: bool = True  # the next word is a command name
    name: str = ""  # the command's name (last command word)
    interp: str = ""  # an interpreter whose program text is still to come
    code_next: bool = False  # the next word is program text
    all_code: bool = False  # eval & co: every argument is code
    names: bool = False  # read & co: arguments are variable names
    declare: bool = False
    var_next: bool = False  # printf -v / [[ -v: the next word is a variable name
    expect: str = ""  # "<<", "<<-": the next word is a heredoc delimiter; ">": a redirection target
    pending: list[_Heredoc] = field(default_factory=list)
    cond: bool = False  # inside [[ ]]
    cond_arith: bool = False
    cond_tags: list[Hashable] = field(default_factory=list)
    case_depth: int = 0
    case_pattern: bool = False
    line_code: bool = False  # an interpreter runs on this line: its heredocs are code
    array: bool = False  # an array literal `a=( … )`: words are values
    skip: int = 0  # words still to come that are values of an interpreter's option
    # -- typed text (placeholders, and what holds them: variables, substitutions) -------------
    typed_word: bool = False  # the current word holds typed text
    had_typed: bool = False  # typed text appeared in this frame (a `$( )` whose output is typed)
    cmd_tags: list[Hashable] = field(default_factory=list)  # typed text of the current command
    log: list[Hashable] = field(default_factory=list)  # typed text of this frame so far
    feed_tags: list[Hashable] = field(default_factory=list)  # typed text on the command's stdin
    piped: bool = False  # the current command reads a pipe
    stdin_program: bool = False  # an interpreter told to read its program from stdin
    # -- wrappers (`timeout 5 cmd`) and `for` ---------------------------------------------------
    operands: int = 0  # a wrapper's operands still to come before its command
    value_next: bool = False  # the next word is the value of a wrapper's option
    for_var: str = ""  # `for NAME in …`: the variable the list's words go to
    opener: str = ""  # cmd frames closed by ")": "$" for $( ), "<" for <( ) and >( )

    def key(self) -> Hashable:
        word = None if not self.in_word else ("long", self._word_class()) if self.long_word else self.word
        return (
            "cmd",
            self.closer,
            self.depth,
            self.comment,
            word,
            self.cmd_pos,
            self.name,
            self.interp,
            self.code_next,
            self.all_code,
            self.names,
            self.declare,
            self.var_next,
            self.expect,
            tuple((h.delimiter, h.quoted, h.strip_tabs, h.code) for h in self.pending),
            self.cond,
            self.cond_arith,
            tuple(self.cond_tags),
            self.case_depth,
            self.case_pattern,
            self.line_code,
            self.array,
            self.skip,
            self.typed_word,
            self.had_typed,
            tuple(self.cmd_tags),
            tuple(self.log),
            tuple(self.feed_tags),
            self.piped,
            self.stdin_program,
            self.operands,
            self.value_next,
            self.for_var,
            self.opener,
        )

    def _word_class(self) -> tuple[bool, bool, bool]:
        return (self.word.startswith("-"), "=" in self.word, bool(_ASSIGNMENT.match(self.word)))



_Frame = _Cmd | _Double | _Single | _Ansi | _Backticks | _Param | _Arith | _Subscript | _Body
_QUOTES = (_Double, _Single, _Ansi)  # quotes within a word: the word goes on through them
#: where any placeholder is refused, whatever it holds
_FIXED_REASON: dict[type, Reason] = {
    _Single: Reason.SINGLE_QUOTES,
    _Ansi: Reason.ANSI_QUOTES,
    _Backticks: Reason.BACKTICKS,
    _Param: Reason.PARAMETER,
    _Arith: Reason.ARITHMETIC,
    _Subscript: Reason.SUBSCRIPT,
}


class ShellLexer:
    """Reads a bash script left to right; decides each placeholder's `Placement`.

    `outcomes` collects the decisions by tag (a placeholder reached along several template
    paths collects several); it is shared by clones.
    """

    def __init__(
        self, outcomes: dict[Hashable, set[Placement]] | None = None, numeric: set[Hashable] | None = None
    ) -> None:
        self.outcomes: dict[Hashable, set[Placement]] = outcomes if outcomes is not None else {}
        #: placeholders whose value is always an integer (`{{ x | int }}`): fine in arithmetic
        self.numeric: set[Hashable] = numeric if numeric is not None else set()
        self._stack: list[_Frame] = [_Cmd()]
        self._escape = False  # the previous character was an unescaped backslash
        self._dollar = False  # the previous character was an unescaped `$`
        self._line = ""  # the current line, for heredoc delimiters
        self._line_ph = False
        self._lineno = 1  # the template line being read (uses of typed variables are reported there)
        #: variables that hold typed text (`v={{ x }}`, `for v in {{ x }}`, `read v`): each use
        #: of one (`$v`, `${v}`, `v` in arithmetic) is checked like a placeholder there
        self._typed: frozenset[str] = frozenset()

    # -- the interface the template walker uses -------------------------------------------------

    def clone(self) -> ShellLexer:
        twin = ShellLexer(self.outcomes, self.numeric)
        twin._stack = copy.deepcopy(self._stack)
        twin._escape, twin._dollar = self._escape, self._dollar
        twin._line, twin._line_ph = self._line, self._line_ph
        twin._lineno, twin._typed = self._lineno, self._typed
        return twin

    def key(self) -> Hashable:
        in_body = any(isinstance(f, _Body) for f in self._stack)
        line = (self._line[:_KEY_WORD_CHARS], self._line_ph) if in_body else None
        return (tuple(f.key() for f in self._stack), self._escape, self._dollar, line, self._typed)

    def feed(self, text: str, line: int | None = None) -> None:
        """Read `text`; `line`: the template line it starts on."""
        if line is not None:
            self._lineno = line
        i = 0
        while i < len(text):
            i = self._step(text, i)

    def placeholder(self, tag: Hashable, *, numeric: bool = False) -> None:
        """A `{{ }}` here; `numeric`: its value is always an integer (`{{ x | int }}`)."""
        if numeric:
            self.numeric.add(tag)
        self._decide(tag, self._placement(tag))
        if not numeric:
            self._mark_typed(tag)
        self._line_ph = True
        self._escape = self._dollar = False
        cmd = self._word_owner()
        if cmd is not None:
            self._append_word(cmd, _PH)
            cmd.in_word = True

    def finish(self) -> dict[Hashable, set[Placement]]:
        """Close the script: its last command ends; a `[[` never closed still refuses what it holds."""
        top = self._stack[-1]
        if isinstance(top, _Cmd) and not top.comment:
            self._end_word(top)
            self._end_command(top)
        for frame in self._stack:
            if isinstance(frame, _Cmd) and frame.cond:
                for tag in frame.cond_tags:
                    self._decide(tag, Placement(reason=Reason.CONDITION))
        return self.outcomes

    # -- decisions -------------------------------------------------------------------------------

    def _decide(self, tag: Hashable, placement: Placement) -> None:
        if tag in self.numeric and placement.reason in _NUMBER_ONLY:
            if placement.reason is Reason.CONDITION:
                return  # `[[ {{ n | int }} -eq 1 ]]`: its form was decided where it stands
            placement = Placement(form=Form.DOUBLE)  # an integer is a fine arithmetic operand
        self.outcomes.setdefault(tag, set()).add(placement)

    # -- typed text ------------------------------------------------------------------------------

    def _mark_typed(self, tag: Hashable) -> None:
        """Typed text stands here: its word, its command and every enclosing frame hold it."""
        owner = self._word_owner()
        if owner is not None:
            owner.typed_word = True
        for frame in self._stack:
            if isinstance(frame, _Cmd):
                _add(frame.cmd_tags, tag)
                _add(frame.log, tag)
                frame.had_typed = True
                if frame.expect in ("<", "<<<"):  # `cmd <<< {{ x }}`, `cmd < <(…{{ x }}…)`
                    _add(frame.feed_tags, tag)

    def _typed_use(self, what: str, placement: Placement | None = None) -> None:
        """A use of typed text (`$v` of a typed variable, a `$( )` that printed typed text):
        decided like a placeholder standing here, unless `placement` says otherwise."""
        tag = ("use", self._lineno, what)
        self._decide(tag, placement if placement is not None else self._placement(tag))
        self._mark_typed(tag)

    def _taint(self, name: str) -> None:
        if name and name not in self._typed:
            self._typed = self._typed | {name}

    def _reads_code(self, cmd: _Cmd) -> bool:
        """Whether the command runs what reaches its standard input."""
        if cmd.name in _REMOTE or cmd.stdin_program:
            return True
        return cmd.name in _STDIN_CODE and (bool(cmd.interp) or cmd.code_next)

    def _placement(self, tag: Hashable) -> Placement:
        frame = self._stack[-1]
        fixed = _FIXED_REASON.get(type(frame))
        if fixed is not None:
            return Placement(reason=fixed)
        if isinstance(frame, _Cmd) and frame.comment:
            return Placement(form=Form.BARE)
        if self._escape:
            return Placement(reason=Reason.AFTER_BACKSLASH)
        if self._dollar:
            return Placement(reason=Reason.AFTER_DOLLAR)
        if isinstance(frame, _Body):
            if frame.heredoc.quoted:
                return Placement(reason=Reason.QUOTED_HEREDOC)
            if frame.heredoc.code:
                return Placement(reason=Reason.CODE_HEREDOC)
            return Placement(form=Form.DOUBLE)
        cmd = self._word_owner()
        if cmd is not None:
            refused = self._command_check(cmd, tag)
            if refused is not None:
                return Placement(reason=refused)
        return Placement(form=Form.BARE if isinstance(frame, _Cmd) else Form.DOUBLE)

    def _command_check(self, cmd: _Cmd, tag: Hashable) -> Reason | None:
        if cmd.expect in ("<<", "<<-"):
            return Reason.HEREDOC_DELIMITER
        if cmd.expect in (">", "<", "<<<"):
            return None  # a file name or input: refused later if the command runs its input
        word = cmd.word
        if cmd.all_code:
            return Reason.EVAL
        if cmd.code_next or (cmd.interp in _PROGRAM_FIRST and not cmd.skip and not word.startswith("-")):
            return Reason.CODE_STRING
        if cmd.interp in _CODE_FLAGS and not cmd.skip and not word.startswith(("-", "+")):
            return Reason.SCRIPT  # `bash {{ x }}`, `python3 {{ x }}`: typed text picks the program
        if cmd.var_next:
            return Reason.CONDITION if cmd.cond else Reason.VARIABLE_NAME
        if (cmd.names or cmd.declare) and "=" not in word:
            return Reason.VARIABLE_NAME
        if cmd.cmd_pos and not cmd.case_pattern and not _ASSIGNMENT.match(word):
            attached = word.startswith("-") and "=" in word  # --user={{ x }}
            if cmd.name in _WRAPPERS and (cmd.value_next or cmd.operands or attached):
                return None  # a value of the wrapper (`timeout {{ x }} cmd`), not its command
            return Reason.COMMAND_NAME
        if cmd.cond:
            cmd.cond_tags.append(tag)
            if cmd.cond_arith:
                return Reason.CONDITION
        return None

    # -- frames ------------------------------------------------------------------------------------

    def _word_owner(self) -> _Cmd | None:
        """The command frame whose current word the text at the top belongs to (through quotes)."""
        for frame in reversed(self._stack):
            if isinstance(frame, _Cmd):
                return frame
            if not isinstance(frame, _QUOTES):
                return None
        return None

    @staticmethod
    def _append_word(cmd: _Cmd, text: str) -> None:
        if not cmd.long_word:
            cmd.word += text
            if len(cmd.word) > _KEY_WORD_CHARS:
                cmd.long_word = True

    def _push(self, frame: _Frame) -> None:
        owner = self._word_owner()
        if owner is not None and not isinstance(frame, (*_QUOTES, _Subscript)):
            owner.in_word = True
            self._append_word(owner, _PH)  # an expansion: the word is not a literal keyword
        self._stack.append(frame)

    # -- the character loop --------------------------------------------------------------------

    def _step(self, text: str, i: int) -> int:
        ch = text[i]
        nxt = text[i + 1] if i + 1 < len(text) else ""
        frame = self._stack[-1]
        escaped, self._escape = self._escape, False
        self._dollar = False
        if ch == "\n":
            self._lineno += 1
            return self._newline(frame, escaped, i)
        self._line += ch
        if isinstance(frame, _Cmd):
            return self._cmd_char(frame, text, i, ch, nxt, escaped)
        owner = self._word_owner()
        if owner is not None and isinstance(frame, _QUOTES):
            owner.in_word = True
            self._append_word(owner, ch)
        if isinstance(frame, _Single):
            if ch == "'":
                self._stack.pop()
            return i + 1
        if escaped:
            return i + 1
        if isinstance(frame, (_Ansi, _Backticks)):
            if ch == "\\":
                self._escape = True
            elif ch == ("'" if isinstance(frame, _Ansi) else "`"):
                self._stack.pop()
            return i + 1
        if isinstance(frame, _Body) and frame.heredoc.quoted:
            return i + 1
        if isinstance(frame, (_Arith, _Subscript, _Param)) and (ch.isalpha() or ch == "_"):
            before = text[i - 1] if i else ""
            if not (before.isalnum() or before in "_$"):
                name = _NAME.match(text, i)
                assert name is not None
                if name.group(0) in self._typed:  # `(( n + 1 ))`: arithmetic reads n's value as code
                    self._typed_use(f"`{name.group(0)}`")
                self._line += name.group(0)[1:]
                return name.end()
        # double quotes, ${ }, arithmetic, subscripts, an unquoted heredoc: \ $ ` are special
        if ch == "\\":
            self._escape = True
            return i + 1
        if ch == "`":
            self._push(_Backticks())
            return i + 1
        if ch == "$":
            return self._dollar_sign(text, i, nxt)
        match frame:
            case _Double():
                if ch == '"':
                    self._stack.pop()
            case _Param():
                self._param_char(frame, ch)
            case _Arith():
                return self._arith_char(frame, i, ch, nxt)
            case _Subscript():
                self._subscript_char(frame, ch)
        return i + 1

    def _dollar_sign(self, text: str, i: int, nxt: str) -> int:
        """`$` where expansions happen: what it opens, if anything."""
        top = self._stack[-1]
        if nxt == "(":
            if text.startswith("((", i + 1):
                self._push(_Arith(closer=")"))
                return i + 3
            self._push(_Cmd(closer=")", opener="$"))
            return i + 2
        if nxt == "{":
            head = _PARAM_HEAD.match(text, i + 2)
            name = head.group(2) if head is not None else ""
            if name in self._typed:
                prompt = text.startswith("@P", head.end()) if head is not None else False
                if head is not None and (head.group(1) == "!" or prompt):
                    self._typed_use(f"`${{{head.group(1)}{name}…}}`", Placement(reason=Reason.INDIRECT))
                else:
                    self._typed_use(f"`${{{name}…}}`")
            in_dq = isinstance(top, _Double | _Body) or (isinstance(top, _Param) and top.in_dq)
            self._push(_Param(in_dq=in_dq))
            if head is None:
                return i + 2
            self._line += text[i + 2 : head.end()]
            return head.end()  # the name itself is read: what follows it is the expansion's
        if nxt == "[":
            self._push(_Arith(closer="]"))
            return i + 2
        if nxt in "'\"" and nxt and isinstance(top, _Cmd):
            self._push(_Ansi() if nxt == "'" else _Double())
            top.in_word = True
            self._append_word(top, _PH)
            return i + 2
        variable = _NAME.match(text, i + 1)
        if variable is not None and variable.group(0) in self._typed:
            self._typed_use(f"`${variable.group(0)}`")
        owner = self._word_owner()
        if owner is not None:
            self._append_word(owner, _PH)  # $name: the word's text is not known
        self._dollar = True
        return i + 1

    def _param_char(self, frame: _Param, ch: str) -> None:
        if ch == "{":
            frame.depth += 1
        elif ch == "}":
            if frame.depth:
                frame.depth -= 1
            else:
                self._stack.pop()
        elif ch == '"':
            self._push(_Double())
        elif ch == "'" and not frame.in_dq:
            self._push(_Single())

    def _arith_char(self, frame: _Arith, i: int, ch: str, nxt: str) -> int:
        if ch == '"':
            self._push(_Double())
        elif ch == "(":
            frame.depth += 1
        elif frame.closer == "]" and ch == "]":
            self._stack.pop()
        elif ch == ")":
            if frame.depth:
                frame.depth -= 1
            elif frame.closer == ")":
                self._stack.pop()
                return i + (2 if nxt == ")" else 1)
        return i + 1

    def _subscript_char(self, frame: _Subscript, ch: str) -> None:
        if ch in "'\"":
            self._push(_Single() if ch == "'" else _Double())
        elif ch == "[":
            frame.depth += 1
        elif ch == "]":
            if frame.depth:
                frame.depth -= 1
                return
            self._stack.pop()
            owner = self._word_owner()
            if owner is not None:
                self._append_word(owner, "]")

    def _newline(self, frame: _Frame, escaped: bool, i: int) -> int:
        line, line_ph = self._line, self._line_ph
        self._line, self._line_ph = "", False
        # a heredoc body ends at its delimiter line, whatever is open inside it (outermost first)
        for index, body in enumerate(self._stack):
            if isinstance(body, _Body) and not line_ph:
                text = line.lstrip("\t") if body.heredoc.strip_tabs else line
                if text == body.heredoc.delimiter:
                    del self._stack[index:]
                    self._start_heredoc(self._stack[-1])
                    return i + 1
        if isinstance(frame, _Cmd):
            if escaped:  # a line continuation
                return i + 1
            if frame.comment:
                frame.comment = False
            else:
                self._end_word(frame)
            self._end_command(frame, keep_pattern=frame.case_pattern)
            for heredoc in frame.pending:
                heredoc.code = heredoc.code or frame.line_code
            frame.line_code = False
            self._start_heredoc(frame)
            return i + 1
        owner = self._word_owner()
        if owner is not None:
            owner.in_word = True
            self._append_word(owner, "\n")
        return i + 1

    def _start_heredoc(self, frame: _Frame) -> None:
        if isinstance(frame, _Cmd) and frame.pending:
            self._stack.append(_Body(frame.pending.pop(0)))

    # -- command frames ----------------------------------------------------------------------------

    def _cmd_char(self, frame: _Cmd, text: str, i: int, ch: str, nxt: str, escaped: bool) -> int:
        if frame.comment:
            return i + 1
        if escaped:
            frame.in_word = True
            self._append_word(frame, "\\" + ch)
            return i + 1
        if ch == "#" and not frame.in_word:
            frame.comment = True
            return i + 1
        if ch in " \t":
            self._end_word(frame)
            return i + 1
        if ch == "&" and nxt == ">":  # &> and &>>: a redirection
            return self._redirection(frame, text, i + 1, ">", text[i + 2 : i + 3])
        if ch in ";&|":
            return self._separator(frame, text, i, ch, nxt)
        if ch in "<>":
            return self._redirection(frame, text, i, ch, nxt)
        if ch == "(":
            return self._open_paren(frame, i, nxt)
        if ch == ")":
            self._end_word(frame)
            if frame.depth:
                frame.depth -= 1
            elif frame.case_depth and frame.case_pattern:
                frame.case_pattern = False
            elif frame.closer == ")":
                self._end_command(frame)
                self._stack.pop()
                outer = self._stack[-1]
                if frame.had_typed and frame.array and isinstance(outer, _Cmd):
                    outer.typed_word = True  # `a=( {{ x }} )`: a holds typed text
                elif frame.had_typed:  # what `$( )` / `<( )` prints is typed text: used here
                    self._typed_use("`$( … )`" if frame.opener == "$" else "`<( … )`")
                return i + 1
            self._end_command(frame)
            return i + 1
        if ch == "\\":
            self._escape = True
            return i + 1
        if ch in "'\"":
            self._push(_Single() if ch == "'" else _Double())
            frame.in_word = True
            self._append_word(frame, ch)
            return i + 1
        if ch == "`":
            frame.in_word = True
            self._push(_Backticks())
            return i + 1
        if ch == "$":
            frame.in_word = True
            return self._dollar_sign(text, i, nxt)
        if ch == "[" and frame.in_word and _IDENTIFIER.match(frame.word):
            self._append_word(frame, "[")
            self._push(_Subscript())
            return i + 1
        frame.in_word = True
        self._append_word(frame, ch)
        return i + 1

    def _separator(self, frame: _Cmd, text: str, i: int, ch: str, nxt: str) -> int:
        self._end_word(frame)
        if ch == ";" and frame.case_depth and nxt in (";", "&"):  # ;; ;& ;;&: the next pattern
            self._end_command(frame, keep_pattern=True)
            frame.case_pattern = True
            return i + 2 + (1 if text.startswith("&", i + 2) else 0)
        if ch == "|" and nxt != "|":  # a pipe (`|`, `|&`): the next command reads this one's output
            self._end_command(frame, pipe=True)
            return i + (2 if nxt == "&" else 1)
        self._end_command(frame)
        return i + (2 if nxt == ch and ch != ";" else 1)

    def _open_paren(self, frame: _Cmd, i: int, nxt: str) -> int:
        if nxt == "(" and not frame.in_word:
            self._push(_Arith(closer=")"))
            return i + 2
        if frame.in_word and frame.word.endswith("=") and _ASSIGNMENT.match(frame.word):
            self._push(_Cmd(closer=")", cmd_pos=False, array=True))
            return i + 1
        self._end_word(frame)
        if frame.case_pattern:  # the optional `(` before a case pattern
            return i + 1
        frame.depth += 1
        self._end_command(frame)
        return i + 1

    def _redirection(self, frame: _Cmd, text: str, i: int, ch: str, nxt: str) -> int:
        if nxt == "(" and not text.startswith("<<", i):  # process substitution
            self._end_word(frame)
            self._push(_Cmd(closer=")", opener="<"))
            frame.in_word = True
            return i + 2
        if frame.in_word and frame.word.isdigit():  # 2>file: a descriptor, not a word
            frame.in_word, frame.word, frame.long_word = False, "", False
        self._end_word(frame)
        for operator in ("<<<", "<<-", "<<"):
            if text.startswith(operator, i):
                frame.expect = operator
                return i + len(operator)
        length = 1
        while i + length < len(text) and text[i + length] in "<>&|":
            length += 1
        input_ = ch == "<" and text[i : i + length] in ("<", "<&")  # what the command reads
        frame.expect = "<" if input_ else ">"
        return i + length

    def _end_word(self, frame: _Cmd) -> None:
        if not frame.in_word:
            return
        word, long_word = frame.word, frame.long_word
        frame.in_word, frame.word, frame.long_word = False, "", False
        if frame.expect in ("<<", "<<-"):
            delimiter, quoted = _unquote(word)
            code = frame.name in _HEREDOC_CODE or frame.all_code
            frame.pending.append(_Heredoc(delimiter, quoted, frame.expect == "<<-", code))
            frame.expect = ""
            return
        typed, frame.typed_word = frame.typed_word, False
        if frame.expect in (">", "<", "<<<"):
            frame.expect = ""
            return
        text = "" if long_word or _PH in word else _unquote(word)[0]
        self._word_done(frame, word, text, typed)

    def _word_done(self, frame: _Cmd, raw: str, text: str, typed: bool = False) -> None:
        """A complete word of a simple command (`text`: its literal value, "" when unknown;
        `typed`: it holds typed text)."""
        assigned = _ASSIGNMENT.match(raw)
        if typed and assigned and (frame.cmd_pos or frame.declare):  # v={{ x }}, export v=…
            self._taint(assigned.group(0).split("[", 1)[0].rstrip("+="))
        if typed and frame.for_var:  # for v in {{ x }}
            self._taint(frame.for_var)
        if frame.cond:
            self._cond_word(frame, text)
        elif frame.case_depth and text == "esac" and (frame.cmd_pos or frame.case_pattern):
            frame.case_depth -= 1
            frame.case_pattern = frame.cmd_pos = False
        elif frame.case_pattern or frame.array:
            pass
        elif frame.cmd_pos:
            self._command_word(frame, raw, text)
        elif frame.name == "case" and text == "in":
            frame.case_pattern = True
        else:
            self._argument(frame, text)

    def _cond_word(self, frame: _Cmd, text: str) -> None:
        if text == "]]":
            if frame.cond_arith:
                for tag in frame.cond_tags:
                    self._decide(tag, Placement(reason=Reason.CONDITION))
            frame.cond, frame.cond_arith, frame.cond_tags = False, False, []
            frame.var_next = False
            return
        if text in self._typed:  # `[[ n -eq 1 ]]`: arithmetic reads n's value as code
            tag = ("use", self._lineno, f"`{text}`")
            self._mark_typed(tag)
            _add(frame.cond_tags, tag)
        frame.cond_arith = frame.cond_arith or text in _ARITH_CONDITIONS
        frame.var_next = text == "-v"

    def _command_word(self, frame: _Cmd, raw: str, text: str) -> None:
        if _ASSIGNMENT.match(raw):
            return
        wrapper = _WRAPPERS.get(frame.name)
        if wrapper is not None:  # an option, its value or an operand: the command comes later
            if frame.value_next:
                frame.value_next = False
                return
            if text.startswith("-") and text != "-":
                option = text.split("=", 1)[0]
                if option in wrapper.code:  # sudo -s, env -S, flock -c: the rest is shell code
                    frame.all_code = True
                frame.value_next = option in wrapper.values and "=" not in text
                return
            if frame.operands:
                frame.operands -= 1
                return
        elif frame.name in _PREFIXES and text.startswith("-"):
            return  # an option of `!`, `time`: the command comes later
        name = text.rsplit("/", 1)[-1]
        frame.name = name
        frame.cmd_pos = name in _PREFIXES
        frame.operands = _WRAPPERS[name].operands if name in _WRAPPERS else 0
        frame.value_next = False
        frame.for_var = ""
        if name == "case":
            frame.case_depth += 1
        frame.cond = name == "[["
        frame.all_code = frame.all_code or name in _EVALS or name in _REMOTE
        frame.names = name in _NAMES
        frame.declare = name in _DECLARES
        frame.interp = name if name in _CODE_FLAGS or name in _PROGRAM_FIRST else ""
        frame.line_code = frame.line_code or name in _HEREDOC_CODE

    def _argument(self, frame: _Cmd, text: str) -> None:
        if frame.name == "for" and not frame.for_var and _IDENTIFIER.match(text):
            frame.for_var = text
        if (frame.names or frame.var_next) and _IDENTIFIER.match(text):
            self._taint(text)  # read v, mapfile v, printf -v v: what they read is not the author's
        if frame.interp in _STDIN_CODE and not frame.skip and not frame.code_next and text in _STDIN_FILES:
            frame.stdin_program = True  # `bash /dev/stdin`, `python3 -`: the program is the input
        if frame.skip:
            frame.skip -= 1
        elif frame.code_next:
            frame.code_next = False
            frame.stdin_program = frame.stdin_program or _code_may_run_stdin(frame.interp, text)
            frame.interp = ""
        elif frame.var_next:
            frame.var_next = False
        elif (frame.interp in _CODE_FLAGS and _CODE_FLAGS[frame.interp].match(text)) or (
            frame.interp in _PROGRAM_FIRST and text == "-e"
        ):
            frame.code_next = True
        elif frame.interp in _PROGRAM_FIRST and text in _PROGRAM_FILES:
            frame.interp, frame.skip = "", 1  # the program comes from a file
        elif frame.interp in _PROGRAM_FIRST and text in _OPTION_VALUES:
            frame.skip = _OPTION_VALUES[text]
        elif frame.interp and not text.startswith("-"):
            frame.interp = ""  # the program or script file came: the rest are its arguments
        if frame.declare and re.match(r"^-[A-Za-z]*i", text):
            frame.all_code = True
        if text == "-v" and frame.name in ("printf", "test", "["):
            frame.var_next = True

    def _end_command(self, frame: _Cmd, *, keep_pattern: bool = False, pipe: bool = False) -> None:
        if frame.cond:  # `[[` spans `&&` and lines: only its own `]]` ends it
            return
        if self._reads_code(frame):  # `… | sh`, `bash <<< …`: typed text it reads would run
            fed = [*frame.feed_tags, *(frame.log if frame.piped else ())]
            for tag in fed:
                self._decide(tag, Placement(reason=Reason.STDIN_CODE))
        if pipe:
            frame.piped = True
        elif frame.name or frame.cmd_tags or not frame.piped:  # (a line break after `|` goes on)
            frame.piped = False
        frame.feed_tags, frame.cmd_tags = [], []
        frame.stdin_program = False
        frame.operands, frame.value_next, frame.for_var = 0, False, ""
        frame.cmd_pos = not keep_pattern and not frame.array
        frame.name = frame.interp = frame.expect = ""
        frame.code_next = frame.all_code = frame.names = frame.declare = frame.var_next = False


def _unquote(word: str) -> tuple[str, bool]:
    """Quote removal on a word's text: (value, whether any part was quoted)."""
    out: list[str] = []
    quoted = False
    i = 0
    while i < len(word):
        ch = word[i]
        if ch == "\\" and i + 1 < len(word):
            out.append(word[i + 1])
            quoted = True
            i += 2
            continue
        if ch == "'":
            end = word.find("'", i + 1)
            end = len(word) if end < 0 else end
            out.append(word[i + 1 : end])
            quoted = True
            i = end + 1
            continue
        if ch == '"':
            quoted = True
            i += 1
            while i < len(word) and word[i] != '"':
                if word[i] == "\\" and i + 1 < len(word) and word[i + 1] in '$`"\\\n':
                    i += 1
                out.append(word[i])
                i += 1
            i += 1
            continue
        out.append(ch)
        i += 1
    return "".join(out), quoted


def _add(tags: list[Hashable], tag: Hashable) -> None:
    """Append `tag` once (a loop passes over the same placeholder again)."""
    if tag not in tags:
        tags.append(tag)
