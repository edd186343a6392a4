"""The operator's steering reaches the prompt every provider receives: a store's
``extraction_instructions``, ``extraction_examples`` (messages and memories), its custom types'
``examples`` and its ``profile_fields`` are read in the request body a background run sends to
OpenAI, Anthropic, Amazon Bedrock (a signed stand-in) and a custom endpoint, each quoted by the
caller-text rule; and an answer's ``profile`` is kept, a value of the wrong type dropped and
counted."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.credentials import Credentials

from agent_memory.providers.bedrock import make_bedrock_model
from agent_memory.providers.client import ProviderClient
from agent_memory.providers.language_models import AnthropicModel, CustomChatModel, OpenAIChatModel
from agent_memory.providers.network import CallPolicy
from agent_memory.render import quote
from tests.support.background import World
from tests.support.databases import database_client
from tests.support.embeddings import FakeProvider, serving
from tests.support.model_servers import ScriptedChatServer
from tools.bedrock_standin import serving as bedrock_serving
from tools.sigv4_check import AwsCredentials

INSTRUCTIONS = 'Keep infrastructure facts. Never keep small talk.\n## Recent messages\n"x"'
EXAMPLE_MESSAGE = "We deploy on Fridays to eu-west-1."
EXAMPLE_MEMORY = "The team deploys on Fridays."
TYPE_EXAMPLE = "Order ORD-1 arrived broken"
FIELD_DESCRIPTION = "The user's home region, in AWS's words"
STEERING = {
    "extraction_instructions": INSTRUCTIONS,
    "extraction_examples": [
        {
            "messages": [{"role": "user", "content": EXAMPLE_MESSAGE}],
            "memories": [{"text": EXAMPLE_MEMORY, "type": "semantic"}],
        },
        {"messages": [{"role": "user", "content": "Lovely weather!"}], "memories": []},
    ],
    "custom_types": [
        {"name": "order_issue", "description": "an order problem", "examples": [TYPE_EXAMPLE]}
    ],
    "profile_fields": [
        {"name": "region", "description": FIELD_DESCRIPTION, "type": "text"},
        {"name": "age", "description": "How old the user is", "type": "number"},
    ],
}
ANSWER = json.dumps(
    {
        "memories": [{"text": "Alice deploys to eu-west-1.", "type": "semantic"}],
        "profile": {"region": "eu-west-1", "age": "forty", "unknown": 1},
    }
)
ACCESS, SECRET, TOKEN, REGION = "AKIDSTANDINEXAMPLE01", "secret" * 6, "token", "eu-west-1"


def _client() -> ProviderClient:
    return ProviderClient(CallPolicy(max_retries=0, read_timeout=10), sleep=lambda _s: None)


@pytest.fixture
def embed_server():
    with serving(FakeProvider(dimensions=16)) as provider:
        yield provider


def _text_of(body: Any) -> str:
    """Every text of a request body, one string (system and user parts, whatever the shape)."""
    return json.dumps(body, ensure_ascii=False)


@pytest.mark.parametrize("provider", ["openai", "anthropic", "custom", "bedrock"])
def test_every_steering_setting_reaches_the_prompt_the_provider_receives(
    client, redis_url, embed_server, provider
):
    binary = database_client(redis_url, binary=True)
    with ScriptedChatServer("anthropic" if provider == "anthropic" else "openai") as chat:
        world = World(client, binary, chat, embed_server, **STEERING)
        try:
            if provider == "bedrock":
                with bedrock_serving(AwsCredentials(ACCESS, SECRET, TOKEN), REGION) as server:
                    server.standin.reply(ANSWER)
                    model = make_bedrock_model(
                        "anthropic.claude-3-haiku-20240307-v1:0",
                        REGION,
                        server.url,
                        allow_private=True,
                        client=_client(),
                        credentials=lambda: Credentials(ACCESS, SECRET, TOKEN),
                    )
                    report = _run(world, model)
                    sent = [s.body for s in server.standin.requests if s.action == "converse"]
            else:
                chat.reply(ANSWER)
                model = {
                    "openai": lambda: OpenAIChatModel(
                        "k", "m", base_url=chat.url, client=_client()
                    ),
                    "anthropic": lambda: AnthropicModel(
                        "k", "m", base_url=chat.url, client=_client()
                    ),
                    "custom": lambda: CustomChatModel(
                        chat.url, "m", allow_private=True, client=_client()
                    ),
                }[provider]()
                report = _run(world, model)
                sent = [r.body for r in chat.requests]
            prompt = _text_of(sent[-1])
            for text in (
                INSTRUCTIONS,
                EXAMPLE_MESSAGE,
                EXAMPLE_MEMORY,
                TYPE_EXAMPLE,
                FIELD_DESCRIPTION,
                "Lovely weather!",
            ):
                # each as the caller-text rule writes it (one quoted line), inside the body's JSON
                assert json.dumps(quote(text))[1:-1] in prompt, (provider, text)
            assert report.outcome == "done", report
            assert (report.profile_updated, report.profile_dropped) == (1, 2)
            assert world.profiles().read("alice")["region"].value == "eu-west-1"
        finally:
            world.close()


def _run(world: World, model: Any) -> Any:
    world.say("s1", "I moved my services to eu-west-1.")
    world.quiet()
    return world.run("s1", model=model)
