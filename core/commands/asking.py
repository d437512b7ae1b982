"""What adapters ask the core without handling a message: read only, nothing claimed or stored.

    handler.asking.suggest_workflows("discord", user, "dep")     # autocomplete
    handler.asking.suggest_runs("discord", channel, user, "3f", "approve")
    handler.asking.form_for(message)                           # open a form as the first answer
    handler.asking.read_form(message, {"service": "web"})      # check a submitted form

Each answers from the catalog, the store and the access rules as `Handler.handle` would,
so what is offered is what would be accepted; a failure answers "nothing" (or the error),
and `handle` has the last word on the command itself.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from core.commands import actions, authz, forms, suggestions
from core.commands.forms import FormResult, inputs_form
from core.commands.input_text import check_message
from core.commands.messages import ChatMessage, Form
from core.commands.model import RunCommand
from core.commands.parser import parse
from core.commands.run_args import build_args
from core.commands.suggestions import Suggestion
from core.config import Access
from core.errors import BatonError
from core.store.port import Store
from core.workflows.catalog import Catalog


@dataclass(frozen=True)
class Asking:
    store: Store
    catalog: Catalog
    access: Access

    def suggest_workflows(self, platform: str, user: str, typed: str) -> list[Suggestion]:
        """Workflow names `user` may run, for autocomplete (read only, nothing recorded)."""
        try:
            self.catalog.reload()
            uid = authz.user_id(platform, user)
            return suggestions.workflows(self.catalog.entries(), self.access, uid, typed)
        except BatonError:
            return []

    def suggest_runs(self, platform: str, conversation: str, user: str, typed: str,
                     command: str) -> list[Suggestion]:
        """Run ids of this conversation `user` may see and `command` acts on, for autocomplete."""
        try:
            recent = self.store.recent_runs(platform=platform, conversation=conversation, limit=200)
        except BatonError:
            return []
        return suggestions.runs(recent, self.access, authz.user_id(platform, user), typed, command)

    def form_for(self, message: ChatMessage) -> Form | None:
        """The form a command needs before it can run (a `run` missing required inputs, which
        the user may start), for an adapter that must open it as its first answer (a Discord
        modal); None: `handle` answers it. Reads the catalog only: nothing is claimed or stored."""
        try:
            check_message(message)
            command = parse(message.text)
            if not isinstance(command, RunCommand) or not actions.typed_only(command):
                return None
            uid = authz.user_id(message.platform, message.user)
            if not authz.may_run(self.access, uid, command.workflow):
                return None
            self.catalog.reload()
            workflow = self.catalog.get(command.workflow)
            args = build_args({}, command.sets, command.message, actions.string_inputs(workflow))
            return inputs_form(workflow, command, args)
        except BatonError:
            return None  # `handle` gives the answer (a usage error, an unknown workflow…)

    def read_form(self, message: ChatMessage, values: Mapping[str, str]) -> FormResult:
        """Check what was submitted in a form whose `command` is `message.text`: the command to
        `handle` (as `message`'s user), or an error per field (`""`: about the whole form)."""
        try:
            check_message(dataclasses.replace(message, text="\n".join([message.text, *values.values()])))
            command = forms.run_of(message.text)
            self.catalog.reload()
            workflow = self.catalog.get(command.workflow)
            args = build_args({}, command.sets, command.message, actions.string_inputs(workflow))
            return forms.read_form(forms.form_of(workflow, command, args), workflow, values)
        except BatonError as exc:
            return FormResult(None, {"": exc.message})
