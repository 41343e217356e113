"""Facade: the agent loop and the model it talks to. It names what lives where:

- the one execution loop every front end drives (run_agent): lmagent/loop/run.py, with its
  prompts, history pairing, compaction, guards and permission gate beside it in lmagent/loop/
- the OpenAI-compatible client (streaming, retries): lmagent/llm/client.py
- what the server has loaded (the model probe): lmagent/llm/probe.py
- what differs between servers (LM Studio, llama.cpp, Ollama, vLLM): lmagent/llm/quirks.py
- tool calls written as text by models without native tool calling: lmagent/llm/toolcalls.py
- the bundled model on llama.cpp's own server (--embedded): lmagent/llm/embedded.py
"""

from lmagent.llm.client import LLMClient, LLMError
from lmagent.llm.probe import probe_model
from lmagent.loop.run import RunResult, run_agent

__all__ = ["LLMClient", "LLMError", "RunResult", "probe_model", "run_agent"]
