"""What adapters ask the core without handling a message: read only, nothing claimed or stored.

    handler.asking.suggest_workflows("discord", user, "dep")     # autocomplete
    handler.asking.suggest_runs("discord", channel, user, "3f", "approve")
    handler.asking.form_for(message)                           # open a form as the first answer
    handler.asking.form_for(message, button_ballot(payload))   # ... for a gate's button: no text read
    handler.asking.read_form(message, {"service": "web"})      # check a submitted form

Each answers from the catalog, the store and the access rules as `Handler.handle` would,
so what is offered is what would be accepted; a failure answers "nothing" (or the error),
and `handle` has the last word on the command itself.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from core.commands import actions, authz, forms, replies, suggestions, voting
from core.commands.forms import FormResult, inputs_form
from core.commands.input_text import check_message
from core.commands.messages import ChatMessage, Form
from core.commands.model import ApproveCommand, RunCommand
from core.commands.parser import parse
from core.commands.run_args import build_args
from core.commands.suggestions import Suggestion
from core.config import Access
from core.engine.approval_policy import Standing
from core.engine.ballots import Ballot, Source, approves_proposal
from core.engine.gates import GateKeeper
from core.errors import BatonError
from core.store.port import Gates, Runs
from core.store.records import Gate, Run
from core.workflows.catalog import Catalog


class AskingStore(Protocol):
    """The store roles `Asking` reads."""

    @property
    def runs(self) -> Runs: ...
    @property
    def gates(self) -> Gates: ...


@dataclass(frozen=True)
class Asking:
    store: AskingStore
    catalog: Catalog
    access: Access
    gates: GateKeeper  # the engine's: a gate's policy and the votes so far

    def suggest_workflows(self, platform: str, user: str, typed: str) -> list[Suggestion]:
        """Workflow names `user` may run, for autocomplete (read only, nothing recorded)."""
        try:
            self.catalog.reload()
            uid = authz.user_id(platform, user)
            return suggestions.workflows(self.catalog.entries(), self.access, uid, typed)
        except BatonError:
            return []

    def suggest(self, what: str, platform: str, conversation: str, user: str, typed: str,
                command: str) -> list[Suggestion]:
        """What an option suggests while it is typed (`Option.suggest`): workflows, or runs."""
        if what == "workflows":
            return self.suggest_workflows(platform, user, typed)
        return self.suggest_runs(platform, conversation, user, typed, command)

    def suggest_runs(self, platform: str, conversation: str, user: str, typed: str,
                     command: str) -> list[Suggestion]:
        """Run ids of this conversation `user` may see and `command` acts on, for autocomplete."""
        try:
            recent = self.store.runs.recent_runs(platform=platform, conversation=conversation, limit=200)
        except BatonError:
            return []
        return suggestions.runs(recent, self.access, authz.user_id(platform, user), typed, command)

    def form_for(self, message: ChatMessage, ballot: Ballot | None = None) -> Form | None:
        """The form a command needs before it can run (a `run` missing required inputs, which
        the user may start, or an approval of a gate with a `form:`), for an adapter that must
        open it as its first answer (a Discord modal); None: `handle` (or `decide`) answers it.
        `ballot`: a gate's button clicked (`voting.button_ballot`), cast by `message`'s user:
        its gate's form, the text never parsed. Reads only: nothing is claimed or stored."""
        try:
            uid = authz.user_id(message.platform, message.user)
            if ballot is not None:
                return self.gate_form(dataclasses.replace(ballot, user=uid))
            check_message(message)
            command = parse(message.text)
            if isinstance(command, ApproveCommand):
                return self._approval_form_for(command, uid)
            if not isinstance(command, RunCommand) or not actions.typed_only(command):
                return None
            if not authz.may_run(self.access, uid, command.workflow):
                return None
            self.catalog.reload()
            workflow = self.catalog.get(command.workflow)
            args = build_args({}, command.sets, command.message, actions.string_inputs(workflow))
            return inputs_form(workflow, command, args)
        except BatonError:
            return None  # `handle` gives the answer (a usage error, an unknown workflow…)

    def _approval_form_for(self, command: ApproveCommand, uid: str) -> Form | None:
        """A typed `approve <run> [choice] [comment]` as the ballot it casts, when nothing typed
        gives the form's values: that ballot's form (`gate_form`)."""
        if any("=" in w for w in command.words):
            return None
        run = self.store.runs.find_run(command.run)
        gate = self.store.gates.waiting_gate(run.id)
        if gate is None:
            return None
        self.catalog.reload()
        ballot = voting.read_ballot(self.gates.spec(run, gate), command.words, command.comment, reject=False,
                                    user=uid, run=run, gate=gate, at=time.time())  # fmt: skip
        return self._gate_form(ballot, run, gate)

    def gate_form(self, ballot: Ballot) -> Form | None:
        """The form of the gate `ballot` answers, when the engine needs its values before it can
        count it: an approval giving none, on a gate with a `form:`, by a voter who may vote and
        has not, that does not approve the proposal already made. None: `decide` answers it
        (refusals, votes)."""
        run = self.store.runs.find_run(ballot.run)
        gate = self.store.gates.waiting_gate(run.id)
        if gate is None or (ballot.node is not None and ballot.node != gate.node_id):
            return None
        self.catalog.reload()
        return self._gate_form(ballot, run, gate)

    def _gate_form(self, ballot: Ballot, run: Run, gate: Gate) -> Form | None:
        if ballot.rejects or ballot.texts:
            return None
        spec, policy, members = self.gates.policy(run, gate)
        if spec is None or not spec.form or ballot.choice not in spec.answers:
            return None  # an unknown choice: `decide` refuses it with the gate's choices
        standing = policy.standing(ballot.user, requester=run.requester, opened_at=gate.created_at,
                                   now=ballot.at, members=members)  # fmt: skip
        if standing is not Standing.ELIGIBLE:
            return None  # `decide` refuses, politely
        before = self.gates.so_far(run, gate, policy, members)
        proposed = before.proposal is not None and approves_proposal(ballot, before.proposal)
        if before.voted(policy, ballot.user) or proposed:
            return None  # `decide` approves the proposal, or says their vote is in
        return replies.approval_values(run, gate, spec, ballot.choice, {}, []).form

    def _approval_form(self, text: str, ballot: Ballot, values: Mapping[str, str]) -> FormResult:
        """A gate's form submitted: each value checked as typed (`voting.typed_values`), then
        the ballot it completes (`ballot`, from the form's `approve <run> [choice]`, with the
        values: `Handler.decide`)."""
        run = self.store.runs.find_run(ballot.run)
        gate = self.store.gates.waiting_gate(run.id) or self.store.gates.decided_gate(run.id)
        self.catalog.reload()
        spec = self.gates.spec(run, gate) if gate is not None else None
        if spec is None:
            return FormResult(text, {}, ballot)  # `decide` says why nothing waits
        given = {name: value for name, value in values.items() if name in spec.form and value.strip() != ""}
        errors: dict[str, str] = {}
        for name in spec.form:
            if name not in given and spec.form[name].default is None:
                errors[name] = f"`{name}` is required."
            elif name in given:
                try:
                    voting.typed_values(spec, {name: given[name]})
                except BatonError as exc:
                    errors[name] = exc.message
        if errors:
            return FormResult(None, errors)
        filled = {name: given.get(name, _text(spec.form[name].default)) for name in spec.form}
        node = gate.node_id if gate is not None else None
        return FormResult(text, {}, dataclasses.replace(ballot, texts=filled, node=node))

    def read_form(self, message: ChatMessage, values: Mapping[str, str]) -> FormResult:
        """Check what was submitted in a form whose `command` is `message.text`: the command to
        `handle` (as `message`'s user), or an error per field (`""`: about the whole form)."""
        try:
            check_message(dataclasses.replace(message, text="\n".join([message.text, *values.values()])))
            ballot = voting.button_ballot(message.text, Source.MODAL)
            if ballot is not None and not ballot.rejects:  # a gate's form: the ballot it completes
                return self._approval_form(message.text, ballot, values)
            command = forms.run_of(message.text)
            self.catalog.reload()
            workflow = self.catalog.get(command.workflow)
            args = build_args({}, command.sets, command.message, actions.string_inputs(workflow))
            return forms.read_form(forms.form_of(workflow, command, args), workflow, values)
        except BatonError as exc:
            return FormResult(None, {"": exc.message})


def _text(value: object) -> str:
    """A default as the text a person types for it."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
