"""Adapters that give agent frameworks a KiviDB store (docs/integrations.md), each an optional
extra importable only with its framework installed:

- ``kividb_memory.integrations.openai_agents.KiviDBSession``: the OpenAI Agents SDK's
  ``Session`` (``pip install "kividb-memory[openai-agents]"``);
- ``kividb_memory.integrations.langchain.KiviDBChatMessageHistory``: LangChain's
  ``BaseChatMessageHistory`` (``[langchain]``).

Each takes ``store=`` (a ``StoreClient`` or an ``AsyncStoreClient``, from
``MemoryClient().store(instance, name)``); left out, one is made from ``KIVIDB_API_URL``,
``KIVIDB_API_KEY``, ``KIVIDB_INSTANCE`` and ``KIVIDB_STORE`` (``sessions.store_from_env``).
"""
