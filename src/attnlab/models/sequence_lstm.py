"""The LSTM baseline of the Neural Turing Machine's tasks (Graves, Wayne & Danihelka 2014, §4:
"a feedforward controller, an LSTM controller and a standard LSTM network").

A stack of LSTMs reads the input vectors and a linear layer turns each hidden state into output
logits; no external memory, so everything it must remember lives in its cell state. Same
interface as :class:`~attnlab.models.NTM`: ``forward(x (B, T, input_dim))`` → ``(B, T,
output_dim)``, so the same task, trainer and pictures serve both.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor, nn

from attnlab.config import Config
from attnlab.memory import check_fits, sized
from attnlab.models.base import PretrainedModel, register_model
from attnlab.validation import check_positive, check_sequence


@dataclass
class SequenceLSTMConfig(Config):
    """``num_layers`` LSTMs of ``hidden_dim`` between ``input_dim`` and ``output_dim`` (the
    paper's baseline for copy: 3 layers of 256)."""

    input_dim: int = 9
    output_dim: int = 8
    hidden_dim: int = 256
    num_layers: int = 3

    def __post_init__(self) -> None:
        for name in ("input_dim", "output_dim", "hidden_dim", "num_layers"):
            check_positive(name, getattr(self, name))


@register_model(task="algorithmic")
class SequenceLSTM(PretrainedModel):
    """``forward(x (B, T, input_dim))`` → logits ``(B, T, output_dim)`` (PyTorch's fused LSTM)."""

    model_type = "sequence_lstm"
    config_class = SequenceLSTMConfig

    def __init__(self, config: SequenceLSTMConfig) -> None:
        super().__init__()
        self.config = c = config
        # its recurrent weights alone (4h × h a layer), before nn.LSTM loops over the layers
        layers = {"num_layers": c.num_layers, "4 × hidden_dim²": 4 * c.hidden_dim**2}
        check_fits([sized("recurrent weights", layers, 4)])
        self.lstm = nn.LSTM(c.input_dim, c.hidden_dim, c.num_layers, batch_first=True)
        self.output = nn.Linear(c.hidden_dim, c.output_dim)

    def forward(self, x: Tensor) -> Tensor:
        check_sequence(x, self.config.input_dim)
        hidden, _ = self.lstm(x)  # (B, T, hidden_dim)
        return self.output(hidden)
