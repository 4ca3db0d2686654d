"""The convolutional encoder of an image captioner: an image → a grid of annotation vectors.

Xu, Ba, Kiros, Cho, Courville, Salakhutdinov, Zemel & Bengio (2015), "Show, Attend and Tell:
Neural Image Caption Generation with Visual Attention", §3.1.1: a convolutional network
"extracts a set of feature vectors which we refer to as annotation vectors", ``L`` vectors of
``D`` dimensions, ``a = {a_1, …, a_L}``, each describing one part of the image — taken from a
lower convolutional layer (before the fully connected ones) so that the decoder can attend to
parts of the picture. Xu et al. take a pretrained VGG's 14 × 14 × 512 map; this one is small
and trained from scratch (Ba (CSC413 Lecture 8), attention-based caption generation)::

    images (B, C, H, W)
      → [conv 3×3 → BN → ReLU → max-pool 2×2] per entry of ``channels`` (B, c_k, H/2^k, W/2^k)
      → conv 3×3 → BN → ReLU                                            (B, D, h, w)
      → flattened row-major: location i = row · w + column              (B, L = h·w, D)
      → + a learned vector per location                                 (B, L, D)

Batch normalisation (Ioffe & Szegedy 2015; ``batch_norm``) is what lets so small a network
learn from scratch in minutes. A convolution is blind to where it is, so each location also
gets a learned position vector (``positions``; the learned positional embedding of
Steinert-Threlkeld (Transformers I) over the flattened grid): without it the decoder could
attend to a digit but not know that it is the *leftmost* one, which a caption that lists
digits "from left to right" must.

The last convolution works at the grid's resolution and widens every vector's receptive
field, so that one location sees a whole object (a 20–28 px digit on a 64 px canvas with the
default three stages: receptive field 38 px, one location per 8 × 8 px cell).
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor, nn

from attnlab.modules.positional import LearnedPositionalEmbedding
from attnlab.validation import check_floating, check_positive, check_tensor, shape_str


class ConvEncoder(nn.Module):
    """``images (B, C, H, W)`` → annotation vectors ``(B, h·w, D)`` (module doc).

    Args:
        in_channels: ``C``, the image's channels (1 grey, 3 RGB).
        image_size: ``H = W``; divisible by ``2 ** len(channels)``.
        channels: the width of each conv + pool stage (each halves the height and width).
        feature_dim: ``D``, the width of the final convolution: the annotation vectors.
        batch_norm: batch normalisation after every convolution.
        positions: add a learned vector per grid location.
    """

    def __init__(
        self, in_channels: int, image_size: int, channels: Sequence[int], feature_dim: int, *,
        batch_norm: bool = True, positions: bool = True,
    ) -> None:
        super().__init__()
        for name, value in (("in_channels", in_channels), ("image_size", image_size),
                            ("feature_dim", feature_dim)):
            check_positive(name, value)
        if not channels:
            raise ValueError("channels must name at least one conv stage, got none")
        for i, width in enumerate(channels):
            check_positive(f"channels[{i}]", width)
        scale = 2 ** len(channels)
        if image_size % scale != 0:
            raise ValueError(
                f"image_size must be divisible by 2 ** len(channels) = {scale} (one 2×2 pool per "
                f"stage), got image_size={image_size}"
            )
        self.in_channels, self.image_size = in_channels, image_size
        self.grid = (image_size // scale, image_size // scale)  # (h, w)
        layers: list[nn.Module] = []
        width = in_channels
        for stage, out in enumerate([*channels, feature_dim]):  # the last one keeps the grid
            layers.append(nn.Conv2d(width, out, 3, padding=1, bias=not batch_norm))
            layers += [nn.BatchNorm2d(out), nn.ReLU()] if batch_norm else [nn.ReLU()]
            if stage < len(channels):
                layers.append(nn.MaxPool2d(2))
            width = out
        self.net = nn.Sequential(*layers)
        h, w = self.grid
        self.positions = LearnedPositionalEmbedding(h * w, feature_dim) if positions else None

    def check_images(self, images: Tensor) -> None:
        """``ValueError`` unless ``images`` is a float ``(B, C, H, W)`` batch of this size."""
        check_tensor("images", images)
        expected = f"(B, {self.in_channels}, {self.image_size}, {self.image_size})"
        if images.dim() != 4:
            raise ValueError(
                f"images must have shape {expected} (batch, channels, height, width), got shape "
                f"{shape_str(images.shape)}"
            )
        check_floating("images", images)
        channels, height, width = images.shape[1:]
        if channels != self.in_channels:
            raise ValueError(
                f"images have {channels} channels but the model takes in_channels="
                f"{self.in_channels}: expected shape {expected}, got {shape_str(images.shape)}"
            )
        if (height, width) != (self.image_size, self.image_size):
            raise ValueError(
                f"images are {height} × {width} but the model takes image_size="
                f"{self.image_size}: expected shape {expected}, got {shape_str(images.shape)}"
            )

    def forward(self, images: Tensor) -> Tensor:
        self.check_images(images)
        maps = self.net(images)  # (B, D, h, w)
        grid = maps.flatten(2).transpose(1, 2)  # (B, L, D), location i = row · w + column
        return grid if self.positions is None else self.positions(grid)
