"""structgen inside other engines: what a serving request carries (:mod:`.constraints`), the rows of
an engine's batch (:mod:`.rows`), and vLLM's logits processor and tool parser (:mod:`.vllm`,
:mod:`.vllm_tools`; import them only where vLLM is installed)."""
