"""Decoding: greedy search, beam search and sampling, all on the models' KV cache.

* :func:`greedy_search` — encoder-decoder (``src``) or decoder-only (``prompt``), :mod:`.greedy`
* :func:`beam_search` — batched, length penalty, early stop, n best: :mod:`.beam`
* :func:`sample` — temperature, top-k, top-p, seed, stop tokens (decoder-only), :mod:`.sampling`
* the decoding state, KV cache and sliding context window they share, :mod:`.state`

Every function returns the *new* token ids of each input row, without ``bos_id``, the prompt or
the final eos/stop token.
"""

from attnlab.generation.beam import Hypothesis, beam_search, length_penalty
from attnlab.generation.greedy import greedy_search
from attnlab.generation.sampling import sample, sample_next, top_k_filter, top_p_filter
from attnlab.generation.state import window_start

__all__ = [
    "Hypothesis",
    "beam_search",
    "greedy_search",
    "length_penalty",
    "sample",
    "sample_next",
    "top_k_filter",
    "top_p_filter",
    "window_start",
]
