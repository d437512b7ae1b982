"""The key components builder: which identity components each kind of step gets."""

from __future__ import annotations

from core.engine.cache_key import UNREGISTERED, cache_key, components_of, definition_digest, digest_value
from core.engine.providers import CommandProvider, FakeProvider, ProviderRegistry
from core.engine.step_identity import environment_components, identity_components
from core.engine.tools import ToolRegistry
from core.workflows.loader import load_workflow_text

WORKFLOW = """
name: w
defaults: {provider: command}
env: {REGION: eu-west-1, MODE: fast}
secrets: [TOKEN, API_KEY]
nodes:
  - id: sh
    bash: echo $REGION
  - id: call
    tool: produce
  - id: ghost
    tool: nobody
  - id: ask
    prompt: hello
  - id: ask_fake
    prompt: hello
    provider: fake
  - id: gate
    approval: ok?
"""

tools = ToolRegistry()


@tools.tool("produce", replay="pure", version="3")
def produce() -> str:
    return "x"


providers = ProviderRegistry({"fake": FakeProvider(), "command": CommandProvider(["llm"])}, "fake")


def _components(node: str, text: str = WORKFLOW) -> dict[str, object]:
    workflow = load_workflow_text(text)
    return identity_components(workflow, workflow.node(node), tools=tools, providers=providers)


def test_each_kind_gets_what_can_change_its_result() -> None:
    env = {"MODE": digest_value("fast"), "REGION": digest_value("eu-west-1")}
    secrets = ["API_KEY", "TOKEN"]  # names only, sorted
    assert _components("sh") == {"env": env, "secrets": secrets}
    assert _components("call") == {"tool": {"produce": "version:3"}, "env": env, "secrets": secrets}
    assert _components("ghost")["tool"] == {"nobody": UNREGISTERED}
    # inherits `defaults.provider: command`, whose process sees the environment
    assert _components("ask") == {"provider": providers.identity("command"), "env": env, "secrets": secrets}
    # its own `provider: fake` answers without a process: the environment cannot change it
    assert _components("ask_fake") == {"provider": {"name": "fake"}}
    assert _components("gate") == {}


def test_secret_values_never_enter_a_key() -> None:
    workflow = load_workflow_text(WORKFLOW)
    assert "eu-west-1" not in repr(environment_components(workflow))  # values as digests
    assert environment_components(load_workflow_text("name: w\nnodes:\n  - id: a\n    bash: x\n")) == {}


def test_without_identity_components_a_key_is_what_it_was_before_they_existed() -> None:
    """Results recorded before identity components existed stay valid for such nodes."""
    node = load_workflow_text("name: w\nnodes:\n  - id: collect\n    bash: git log {{ inputs.version }}\n")
    definition = definition_digest(node.node("collect"), script_source=None, files={})
    assert definition == "1c377033a47f7812e8a0192e94803329589551d7be9c163d4fa85123ff31686f"
    components = components_of(
        node_id="collect",
        kind="bash",
        definition=definition,
        inputs={"version": "v1"},
        upstream={"up": "o1"},
        identity=identity_components(node, node.node("collect"), tools=tools, providers=providers),
    )
    # computed with the engine as it was before (engine_version 1)
    assert cache_key(components) == "6b9c9eef109459c431c0a770a405a8e9e8e9234cd85a41a130ac53c2b182208f"


def test_a_node_s_own_env_and_secrets_are_its_identity_on_top_of_the_workflow_s() -> None:
    text = WORKFLOW.replace(
        "  - id: sh\n    bash: echo $REGION\n",
        "  - id: sh\n    bash: echo $REGION\n    env: {REGION: us-east-2}\n    secrets: [SH_ONLY]\n",
    )
    assert _components("sh", text) == {
        "env": {"MODE": digest_value("fast"), "REGION": digest_value("us-east-2")},  # the node wins
        "secrets": ["API_KEY", "SH_ONLY", "TOKEN"],
    }
    assert _components("call", text)["env"]["REGION"] == digest_value("eu-west-1")  # others keep theirs


def test_nodes_sharing_components_share_their_encoding_and_no_others_do() -> None:
    from core.engine.cache_key import encode_identity
    from core.engine.prepared import identities_of, prepare

    registry = ToolRegistry()
    registry.tool("produce", replay="pure", version="3")(produce)

    @registry.tool("other", replay="pure", version="4")
    def other() -> str:
        return "y"

    text = WORKFLOW + """  - id: call_again
    tool: produce
  - id: call_other
    tool: other
  - id: own_env
    tool: produce
    env: {MODE: slow}
"""
    identities = identities_of(prepare(load_workflow_text(text), registry), providers)
    for node_id, components in identities.components.items():
        assert identities.encoded[node_id] == encode_identity(components), node_id
    encoded = identities.encoded
    assert encoded["call"] is encoded["call_again"]  # encoded once
    assert len({encoded["call"], encoded["call_other"], encoded["ghost"], encoded["own_env"]}) == 4
