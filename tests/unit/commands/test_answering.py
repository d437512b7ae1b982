"""`answering`: a refused form's answer."""

from __future__ import annotations

from core.commands.answering import form_refused
from core.commands.messages import Form
from core.commands.replies import FORM_ACTION


def test_a_refused_form_is_a_private_error_with_its_button() -> None:
    form = Form(kind="run", title="Run deploy", submit="Run", command="run deploy")
    reply = form_refused(form, {"replicas": "not a number", "": "one more thing"})
    assert reply.is_error and reply.how.ephemeral
    assert reply.data["message"] == "replicas: not a number · one more thing"
    assert [b.action for b in reply.buttons] == [FORM_ACTION]
