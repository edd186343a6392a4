"""An OpenAI Agents SDK agent whose conversation is a KiviDB session.

Run against the local stack (`make run`, then in another shell):

    KIVIDB_API_URL=http://127.0.0.1:3000 KIVIDB_API_KEY=<the key make run printed> \
    KIVIDB_INSTANCE=local KIVIDB_STORE=examples .venv/bin/python examples/openai_agents_session.py

The model is the SDK's own ScriptedModel, so it runs offline; put a real model name in its
place (and OPENAI_API_KEY) for a real agent. The store is created if it is missing.
"""

from __future__ import annotations

import asyncio
import os

from agents import Agent, Runner, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message

from kividb_memory import AsyncMemoryClient
from kividb_memory.integrations.openai_agents import KiviDBSession


async def main() -> None:
    set_tracing_disabled(True)  # offline: no traces sent to OpenAI
    instance, name = os.environ["KIVIDB_INSTANCE"], os.environ["KIVIDB_STORE"]
    async with AsyncMemoryClient() as client:
        await client.put_store(instance, name)
        session = KiviDBSession("example-chat", store=client.store(instance, name), actor_id="ann")
        await session.clear_session()
        model = ScriptedModel()
        agent = Agent(name="assistant", model=model)
        model.enqueue([assistant_message("Nice to meet you, Ann.")])
        await Runner.run(agent, "Hi, I am Ann.", session=session)
        model.enqueue([assistant_message("You are Ann.")])
        result = await Runner.run(agent, "Who am I?", session=session)
        print(result.final_output)
        print(f"the session keeps {len(await session.get_items())} items")


if __name__ == "__main__":
    asyncio.run(main())
