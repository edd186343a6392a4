"""Adapters that give agent frameworks a KiviDB store (docs/integrations.md), each an optional
extra importable only with its framework installed:

- ``kividb_memory.integrations.openai_agents.KiviDBSession``: the OpenAI Agents SDK's
  ``Session`` (``pip install "kividb-memory[openai-agents]"``);
- ``kividb_memory.integrations.langchain.KiviDBChatMessageHistory``: LangChain's
  ``BaseChatMessageHistory`` (``[langchain]``);
- ``kividb_memory.integrations.langgraph.KiviDBStore``: LangGraph's ``BaseStore``
  (``[langgraph]``);
- ``kividb_memory.integrations.strands.KiviDBMemoryStore``: a Strands ``MemoryStore``
  (``[strands]``);
- ``kividb_memory.integrations.adk.KiviDBSessionService`` and ``KiviDBMemoryService``: Google
  ADK's session and memory services (``[adk]``);
- ``kividb_memory.integrations.crewai.KiviDBStorage``: CrewAI's memory ``StorageBackend``
  (``[crewai]``);
- ``kividb_memory.integrations.llamaindex.KiviDBChatStore`` and ``KiviDBMemoryBlock``:
  LlamaIndex's ``BaseChatStore`` and a ``Memory`` block (``[llamaindex]``);
- ``kividb_memory.integrations.anthropic.KiviDBMemoryTool`` (and ``AsyncKiviDBMemoryTool``):
  Claude's memory tool, ``memory_20250818`` (``[anthropic]``).

Each takes ``store=`` (a ``StoreClient`` or an ``AsyncStoreClient``, from
``MemoryClient().store(instance, name)``); left out, one is made from ``KIVIDB_API_URL``,
``KIVIDB_API_KEY``, ``KIVIDB_INSTANCE`` and ``KIVIDB_STORE`` (``sessions.store_from_env``).
"""
