"""The one factory of providers: the language model, the embedder and the reranker that a
store's settings name, built from a ``ProviderSetting`` (which provider, model, base URL, AWS
region, and the key as stored) and an ``Outbound`` (the HTTP client the calls go through, the
private-address rule, and the function that unseals a stored key, handed in by the caller).

Each ``make_*`` picks the provider's class (``providers.language_models``,
``providers.embeddings``, ``providers.rerankers``, ``providers.bedrock``) and checks that the
settings the provider needs are there (``ValidationFailed`` naming the field, as
``{"field": "llm_model", "problem": "required"}``); nothing is called. Each ``lazy_*`` does the
same at the provider's first call (``providers.lazy``), so that a request or a run that calls
no provider never unseals a key nor fails on a provider's settings.

One module holds the dispatch for all three, so the provider modules import only what they
are made of: ``providers.bedrock`` builds on the classes of the others, and they no longer
import it back.
"""

from __future__ import annotations

from collections.abc import Callable

from agent_memory.providers.bedrock import (
    make_bedrock_embedder,
    make_bedrock_model,
    make_bedrock_reranker,
)
from agent_memory.providers.client import endpoint
from agent_memory.providers.embeddings import CustomEmbedder, Embedder, NoEmbedder, OpenAIEmbedder
from agent_memory.providers.language_models import (
    AnthropicModel,
    CustomChatModel,
    LanguageModel,
    OpenAIChatModel,
)
from agent_memory.providers.lazy import LazyEmbedder, LazyLanguageModel, LazyReranker
from agent_memory.providers.rerankers import (
    COHERE_BASE_URL,
    JINA_BASE_URL,
    JINA_SHAPE,
    VOYAGE_BASE_URL,
    VOYAGE_SHAPE,
    HttpReranker,
    Reranker,
)
from agent_memory.providers.setting import Outbound, ProviderSetting

LANGUAGE_MODELS = ("openai", "anthropic", "bedrock", "custom")
EMBEDDERS = ("openai", "bedrock", "custom")
HTTP_RERANKERS = ("cohere", "voyage", "jina", "custom")


def make_language_model(setting: ProviderSetting, outbound: Outbound) -> LanguageModel | None:
    """The language model of ``setting``, or None for ``none``: ``openai`` and ``anthropic``
    need ``model`` and a key and take no ``base_url``; ``custom`` needs ``model`` and
    ``base_url`` (a key is optional); ``bedrock`` needs ``model`` and ``aws_region`` (no key:
    the function's role signs). A custom endpoint is checked at each call."""
    if setting.provider == "none":
        return None
    if setting.provider not in LANGUAGE_MODELS:
        raise setting.unknown(LANGUAGE_MODELS)
    model, client, allow_private = setting.model, outbound.client, outbound.allow_private
    if not model:
        raise setting.missing("llm_model")
    if setting.provider == "bedrock":
        return make_bedrock_model(
            model, setting.aws_region, setting.base_url, allow_private=allow_private, client=client
        )
    api_key = outbound.api_key(setting)
    if setting.provider == "custom":
        if not setting.base_url:
            raise setting.missing("llm_base_url")
        return CustomChatModel(
            setting.base_url, model, api_key or None, allow_private=allow_private, client=client
        )
    if setting.base_url is not None:
        raise setting.unexpected_base_url()
    if not api_key:
        raise setting.missing("llm_api_key")
    if setting.provider == "openai":
        return OpenAIChatModel(api_key, model, client=client)
    return AnthropicModel(api_key, model, client=client)


def make_embedder(setting: ProviderSetting, dimensions: int, outbound: Outbound) -> Embedder:
    """The embedder of ``setting`` for vectors of ``dimensions``: ``none`` takes the
    clients' vectors (``NoEmbedder``); ``openai`` needs ``model`` and a key, no ``base_url``;
    ``custom`` needs ``model`` and ``base_url`` (a key is optional); ``bedrock`` needs
    ``model`` and ``aws_region`` (no key)."""
    if setting.provider == "none":
        return NoEmbedder(dimensions)
    if setting.provider not in EMBEDDERS:
        raise setting.unknown(EMBEDDERS)
    model, client, allow_private = setting.model, outbound.client, outbound.allow_private
    if not model:
        raise setting.missing("embed_model")
    if setting.provider == "bedrock":
        return make_bedrock_embedder(
            model,
            dimensions,
            setting.aws_region,
            setting.base_url,
            allow_private=allow_private,
            client=client,
        )
    api_key = outbound.api_key(setting)
    if setting.provider == "openai":
        if setting.base_url is not None:
            raise setting.unexpected_base_url()
        if not api_key:
            raise setting.missing("embed_api_key")
        return OpenAIEmbedder(api_key, model, dimensions, client=client)
    if not setting.base_url:
        raise setting.missing("embed_base_url")
    return CustomEmbedder(
        setting.base_url,
        model,
        dimensions,
        api_key or None,
        allow_private=allow_private,
        client=client,
    )


def make_reranker(
    setting: ProviderSetting,
    outbound: Outbound,
    llm_scorer: Callable[[], Reranker] | None = None,
) -> Reranker:
    """The reranker of ``setting`` (not ``none``): the HTTP rerankers (``cohere``, ``voyage``
    and ``jina`` need a key; a ``base_url`` given for them replaces their public address
    unchecked, which a store's settings refuse and tests use; ``custom`` needs ``base_url``,
    checked at every call, its key optional), ``bedrock`` (``model`` and ``aws_region``), or
    ``llm``, the store's language model scoring the candidates: what ``llm_scorer`` makes
    (``providers.llm_reranker.LlmReranker``)."""
    client, allow_private = outbound.client, outbound.allow_private
    if setting.provider == "llm" and llm_scorer is not None:
        return llm_scorer()
    if setting.provider not in (*HTTP_RERANKERS, "bedrock"):
        raise setting.unknown((*HTTP_RERANKERS, "bedrock", "llm"))
    model = setting.model
    if not model:
        raise setting.missing("rerank_model")
    if setting.provider == "bedrock":
        return make_bedrock_reranker(
            model, setting.aws_region, setting.base_url, allow_private=allow_private, client=client
        )
    api_key = outbound.api_key(setting)
    if setting.provider == "custom":
        if not setting.base_url:
            raise setting.missing("rerank_base_url")
        url = endpoint(setting.base_url, "rerank")
        return HttpReranker(
            url=url,
            model=model,
            api_key=api_key or None,
            client=client,
            custom=True,
            allow_private=allow_private,
        )
    if not api_key:
        raise setting.missing("rerank_api_key")
    if setting.provider == "cohere":
        url = endpoint(setting.base_url or COHERE_BASE_URL, "rerank")
        return HttpReranker(url=url, model=model, api_key=api_key, client=client)
    if setting.provider == "voyage":
        url = endpoint(setting.base_url or VOYAGE_BASE_URL, "rerank")
        return HttpReranker(
            url=url,
            model=model,
            api_key=api_key,
            client=client,
            shape=VOYAGE_SHAPE,
        )
    url = endpoint(setting.base_url or JINA_BASE_URL, "rerank")
    return HttpReranker(url=url, model=model, api_key=api_key, client=client, shape=JINA_SHAPE)


def lazy_language_model(
    setting: ProviderSetting,
    outbound: Outbound,
    before_call: Callable[[], None] | None = None,
) -> LazyLanguageModel | None:
    """``make_language_model`` at the model's first call, after ``before_call`` (the daily
    model-token quota) at every call; None for ``none``."""
    if setting.provider == "none":
        return None

    def build() -> LanguageModel:
        model = make_language_model(setting, outbound)
        assert model is not None  # the provider is not "none" here
        return model

    return LazyLanguageModel(build, before_call)


def lazy_embedder(setting: ProviderSetting, dimensions: int, outbound: Outbound) -> LazyEmbedder:
    """``make_embedder`` when something is first embedded."""
    return LazyEmbedder(dimensions, lambda: make_embedder(setting, dimensions, outbound))


def lazy_reranker(
    setting: ProviderSetting,
    outbound: Outbound,
    llm_scorer: Callable[[], Reranker] | None = None,
) -> LazyReranker | None:
    """``make_reranker`` at the reranker's first call (a reranker that cannot be built then
    fails the rerank stage, which keeps the fused order); None for ``none``."""
    if setting.provider == "none":
        return None
    return LazyReranker(lambda: make_reranker(setting, outbound, llm_scorer))
