"""A model's own random number generator, as the IPU holds one: seeded when the model compiles from
``Options.randomSeed`` (without one, from a draw of torch's generator, so a script seeded with
``torch.manual_seed`` stays reproducible), its state carried from call to call, and torch's own generator on the
host left as it was. Two models compiled with the same seed draw the same numbers (PopTorch's
``test_random_seed_repeatability``)."""
from __future__ import annotations

import contextlib
from typing import Iterator, Optional

import torch


class DeviceRng:
    """The generator state of one compiled model."""

    def __init__(self, seed: Optional[int]) -> None:
        if seed is None:
            seed = int(torch.randint(0, 2**62, (1,)))
        host = torch.get_rng_state()
        torch.manual_seed(int(seed))
        self.state = torch.get_rng_state()
        torch.set_rng_state(host)

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """torch's random ops draw from this model's generator in the ``with`` block."""
        host = torch.get_rng_state()
        torch.set_rng_state(self.state)
        try:
            yield
        finally:
            self.state = torch.get_rng_state()
            torch.set_rng_state(host)
