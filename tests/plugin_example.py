"""The example plugin (examples/plugin) as the tests use it: its folder and a checkpoint
of its model family."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import REPO

EXAMPLE = REPO / "examples" / "plugin"


def colour_bag_checkpoint(folder: Path, load_delay_s: float = 0) -> None:
    """The example family's checkpoint: random-init weights, easy-VQA's answers; loading
    it waits ``load_delay_s`` seconds."""
    import torch
    from safetensors.torch import save_file

    answers = [
        "circle",
        "rectangle",
        "triangle",
        "red",
        "green",
        "blue",
        "black",
        "gray",
        "teal",
        "brown",
        "yellow",
        "yes",
        "no",
    ]
    folder.mkdir(parents=True)
    config = {"answers": answers, "buckets": 16}
    if load_delay_s:
        config["load_delay_s"] = load_delay_s
    (folder / "config.json").write_text(json.dumps(config))
    torch.manual_seed(0)
    layer = torch.nn.Linear(3 + 16, len(answers))
    save_file(
        {k: v.contiguous() for k, v in layer.state_dict().items()},
        str(folder / "model.safetensors"),
    )
