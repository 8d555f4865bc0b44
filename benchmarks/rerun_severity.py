"""What adding one severity to a finished ``run_model`` job costs: the default study's
ViLT architecture (briefly trained; cost does not depend on how well) on snow at
severities 1-4 of the default 200-image subset, then the same job with severity 5 added.

    .venv/bin/python benchmarks/rerun_severity.py
    PYTHONPATH=OTHER_CHECKOUT/src .venv/bin/python benchmarks/rerun_severity.py   # other code

Prints the wall time of the first job and of the rerun, and how many questions the rerun
answered (the model's calls are counted). One thread, as a ``run_model`` job on the
default's ``threads.infer``.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

VILT = {
    "hidden_size": 128,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "intermediate_size": 512,
    "patch_size": 16,
}


def main() -> None:
    import vqarobust
    from vqarobust.datasets import PreparedOutputs, prepare_dataset
    from vqarobust.inference import Subset, run_inference
    from vqarobust.materialize.images import corrupt_subset
    from vqarobust.models import ModelRef, load_model
    from vqarobust.models.recipe import Recipe
    from vqarobust.models.training import train_reference_model

    torch.set_num_threads(1)
    print(f"vqarobust from {Path(vqarobust.__file__).parent}")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        data = {}
        for split, n in (("train", 100), ("test", 200)):
            paths = [root / split / f for f in ("q.parquet", "images", "m.txt", "d.json")]
            prepare_dataset("easy-vqa", PreparedOutputs(*paths), split=split, n_images=n, seed=0)
            data[split] = paths
        train_reference_model(
            str(data["train"][0]),
            str(data["train"][1]),
            root / "vilt",
            Recipe.of("vilt", epochs=0.05, batch_size=64, **VILT),
        )
        subsets = []
        for severity in range(1, 6):
            corrupt_subset(data["test"][1], root / f"snow{severity}", "snow", severity)
            subsets.append(Subset("snow", severity, str(root / f"snow{severity}")))
        answered = {"n": 0}

        def counting(*args, **kwargs):  # noqa: ANN202
            model = load_model(*args, **kwargs)
            answer = model.answer

            def counted(images, questions):  # noqa: ANN001, ANN202
                answered["n"] += len(questions)
                return answer(images, questions)

            model.answer = counted
            return model

        spec = {"family": "vqa-classifier", "path_or_id": str(root / "vilt")}
        ref = ModelRef("vilt-tiny", spec, options={"batch_size": 256}, loader=counting)
        out = root / "pred.parquet"
        for label, chosen in (("severities 1-4", subsets[:4]), ("severity 5 added", subsets)):
            answered["n"] = 0
            t = time.perf_counter()
            n = run_inference(ref, data["test"][0], chosen, out, "cpu")
            print(
                f"{label}: {time.perf_counter() - t:.1f} s wall, {n} predictions, "
                f"{answered['n']} questions answered"
            )


if __name__ == "__main__":
    main()
