"""Google ADK's own runtime on ``KiviDBSessionService`` and ``KiviDBMemoryService``: a ``Runner``
with an ``LlmAgent`` whose tool changes session and user state, over a scripted model (ADK's
package ships no model test double: its tests' ``MockModel`` lives in its repository, not in
the distribution, so the scripted ``BaseLlm`` is ours). ADK publishes no tests in its source
distribution, so its runtime is the proof (docs/integrations.md, "Google ADK")."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator
from typing import Any

import pytest
from google.adk.agents import LlmAgent
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.events.event import Event
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions.base_session_service import GetSessionConfig
from google.adk.tools.tool_context import ToolContext
from google.genai import types
from pydantic import PrivateAttr

from kividb_memory import AsyncMemoryClient
from kividb_memory.integrations.adk import KiviDBMemoryService, KiviDBSessionService, session_key
from tests.support.stack import model_store


class ScriptedLlm(BaseLlm):
    """Answers each model call with the next of ``replies``, recording each request."""

    model: str = "scripted"
    _replies: list[types.Content] = PrivateAttr(default_factory=list)
    _requests: list[LlmRequest] = PrivateAttr(default_factory=list)

    def script(self, *replies: types.Content) -> ScriptedLlm:
        self._replies.extend(replies)
        return self

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self._requests.append(llm_request)
        yield LlmResponse(content=self._replies.pop(0))


def remember_city(city: str, tool_context: ToolContext) -> dict[str, Any]:
    """Keep where the user lives."""
    tool_context.state["user:city"] = city
    tool_context.state["turns"] = 1
    tool_context.state["temp:scratch"] = "never kept"
    return {"kept": city}


def _say(text: str) -> types.Content:
    return types.Content(role="model", parts=[types.Part(text=text)])


def _call(city: str) -> types.Content:
    call = types.FunctionCall(id="call-1", name="remember_city", args={"city": city})
    return types.Content(role="model", parts=[types.Part(function_call=call)])


async def _turn(runner: Runner, session_id: str, text: str) -> list[Event]:
    message = types.Content(role="user", parts=[types.Part(text=text)])
    return [
        e async for e in runner.run_async(user_id="ann", session_id=session_id, new_message=message)
    ]


def test_an_agent_run_is_kept_and_a_new_service_gives_it_back(stack, memory_store):
    async def go() -> None:
        async with AsyncMemoryClient(stack.url, stack.api_key) as client:
            store = client.store(memory_store.instance_id, memory_store.name)
            service = KiviDBSessionService(store=store)
            model = ScriptedLlm().script(_call("Porto"), _say("Noted: Porto."))
            agent = LlmAgent(name="helper", model=model, tools=[remember_city])
            runner = Runner(app_name="trips", agent=agent, session_service=service)
            session = await service.create_session(
                app_name="trips", user_id="ann", state={"app:tier": "gold", "lang": "pt"}
            )
            produced = await _turn(runner, session.id, "I moved to Porto.")

            again = KiviDBSessionService(store=store)  # a new process would see the same
            kept = await again.get_session(app_name="trips", user_id="ann", session_id=session.id)
            assert kept is not None
            assert [e.id for e in kept.events][1:] == [e.id for e in produced]
            assert kept.events[1].get_function_calls()[0].args == {"city": "Porto"}
            assert kept.events[2].get_function_responses()[0].response == {"kept": "Porto"}
            assert kept.events[3].content.parts[0].text == "Noted: Porto."
            assert [e.timestamp for e in kept.events] == [
                pytest.approx(e.timestamp, abs=0.001) for e in [kept.events[0], *produced]
            ]
            assert kept.state == {
                "lang": "pt",
                "turns": 1,
                "app:tier": "gold",
                "user:city": "Porto",
            }
            view = await store.get_session(session_key("trips", "ann", session.id))
            assert view.actor_id == "ann"
            assert [(m.role, m.name) for m in view.messages] == [
                ("user", "user"),
                ("assistant", "helper"),
                ("tool", "helper"),
                ("assistant", "helper"),
            ]

            # the next turn on the new service: the model is given the first turn back
            model2 = ScriptedLlm().script(_say("You live in Porto."))
            runner2 = Runner(
                app_name="trips",
                agent=LlmAgent(name="helper", model=model2, tools=[remember_city]),
                session_service=again,
            )
            await _turn(runner2, session.id, "Where do I live?")
            seen = model2._requests[0].contents
            assert any(p.function_call for c in seen for p in c.parts or [])
            assert seen[-1].parts[0].text == "Where do I live?"

            other = await again.create_session(app_name="trips", user_id="ann", session_id="s2")
            assert other.state == {"app:tier": "gold", "user:city": "Porto"}
            assert await again.get_user_state(app_name="trips", user_id="ann") == {"city": "Porto"}
            listed = await again.list_sessions(app_name="trips", user_id="ann")
            assert {s.id for s in listed.sessions} == {session.id, "s2"}
            assert all(not s.events for s in listed.sessions)
            recent = await again.get_session(
                app_name="trips",
                user_id="ann",
                session_id=session.id,
                config=GetSessionConfig(num_recent_events=2),
            )
            assert recent is not None and len(recent.events) == 2
            with pytest.raises(AlreadyExistsError):
                await again.create_session(app_name="trips", user_id="ann", session_id="s2")
            await again.delete_session(app_name="trips", user_id="ann", session_id=session.id)
            gone = await again.get_session(app_name="trips", user_id="ann", session_id=session.id)
            assert gone is None
            assert [s.id for s in (await again.list_sessions(app_name="trips")).sessions] == ["s2"]

    asyncio.run(go())


def test_an_event_appended_twice_is_kept_once_and_an_odd_app_name_is_its_own_session(
    memory_store,
):
    async def go() -> None:
        service = KiviDBSessionService(store=memory_store)  # a sync client, in worker threads
        session = await service.create_session(app_name="app.v2/β", user_id="ann@x")
        event = Event(
            author="user",
            invocation_id="inv-1",
            content=types.Content(role="user", parts=[types.Part(text="hello")]),
        )
        await service.append_event(session, event)
        await service.append_event(session, event.model_copy())  # ADK retrying one append
        kept = await service.get_session(
            app_name="app.v2/β", user_id="ann@x", session_id=session.id
        )
        assert kept is not None and [e.id for e in kept.events] == [event.id]
        assert session_key("app.v2/β", "ann@x", session.id).startswith("adk:h:")
        missing = session.model_copy(update={"id": "nope"})
        with pytest.raises(ValueError, match="not found"):
            await service.append_event(missing, event)

    asyncio.run(go())


def test_the_memory_service_extracts_a_session_and_finds_it_for_its_user(
    open_stack, memory, provider
):
    name = model_store(memory, provider).rsplit("/", 1)[1]
    store = memory.store("local", name)
    try:

        async def go() -> list[str]:
            sessions = KiviDBSessionService(store=store)
            memories = KiviDBMemoryService(store=store, search_mode="keyword")
            session = await sessions.create_session(app_name="trips", user_id="ann")
            said = Event(
                author="user",
                invocation_id="inv-1",
                content=types.Content(
                    role="user", parts=[types.Part(text="I adopted a cat named Miso.")]
                ),
            )
            await sessions.append_event(session, said)
            await memories.add_session_to_memory(session)  # already kept: extraction starts
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                found = await memories.search_memory(app_name="trips", user_id="ann", query="Miso")
                if found.memories:
                    break
                await asyncio.sleep(0.5)
            other = await memories.search_memory(app_name="trips", user_id="bob", query="Miso")
            assert other.memories == []
            view = await asyncio.to_thread(
                store.get_session, session_key("trips", "ann", session.id)
            )
            assert view.message_count == 1  # the memory service added nothing twice
            return [m.content.parts[0].text for m in found.memories]

        texts = asyncio.run(go())
        assert texts and "Miso" in texts[0]
    finally:
        memory.delete_store("local", name)
