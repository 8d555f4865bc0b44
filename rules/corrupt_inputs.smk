# Input functions and params of rules/corrupt.smk.

from vqarobust.code_digest import code_digest
from vqarobust.corruptions import needs as corruption_needs
from vqarobust.corruptions.boxes import NEEDS as BOXES

BOX_CODE = code_digest("vqarobust.datasets.object_boxes")


def get_corrupt_input(wildcards):
    inputs = {"images": f"resources/datasets/{DATASET}/eval/images"}
    if wildcards.corruption == "stylize":
        stylize = config["stylize"]
        inputs.update(weights=user_path(stylize["weights"]), styles=user_path(stylize["styles"]))
    if corruption_needs(wildcards.corruption) == BOXES:
        inputs["boxes"] = f"results/{DATASET}/boxes.parquet"
    return inputs


def get_corruption_engine(wildcards):
    return perturbation_engine(ENGINE_VERSION, wildcards.corruption)


def get_box_sources(wildcards):
    """The annotations that say where objects are: COCO's instances (vqav2), GQA's
    questions and scene graphs; none for scenes (its graphs are generated)."""
    dataset = config["dataset"]
    if dataset["adapter"] == "vqav2":
        return {"instances": user_path(config["context"]["instances"])}
    if dataset["adapter"] == "gqa":
        return {key: user_path(dataset[key]) for key in ("questions", "scene_graphs")}
    return {}


def get_box_params(wildcards):
    """The dataset adapter, and the scenes' seed and split (what generates their graphs)."""
    dataset = config["dataset"]
    settings = {"adapter": dataset["adapter"]}
    if dataset["adapter"] == "scenes":
        settings.update(scene_seed=dataset.get("scene_seed", 0), split=dataset["split"])
    return settings


LPIPS = bool(config["lpips"].get("backbone"))


def get_lpips_input(wildcards):
    return {
        "clean": f"resources/datasets/{DATASET}/eval/images",
        "images": f"results/{DATASET}/images/{wildcards.corruption}/{wildcards.severity}",
        "backbone": user_path(config["lpips"]["backbone"]),
        "linear": user_path(config["lpips"]["linear"]),
    }


def get_lpips_files(wildcards):
    """Every corrupted subset's LPIPS table (the image_quality analysis), none when off."""
    if not LPIPS:
        return []
    return [
        f"results/{DATASET}/quality/lpips/{p}/{s}.parquet"
        for p, s in get_image_subsets(wildcards)
        if p != "clean"
    ]


def get_stylize_params(wildcards):
    """The stylize settings for its own jobs (none for other corruptions)."""
    if wildcards.corruption != "stylize":
        return {}
    return canonical({"style_size": config["stylize"]["style_size"]})


def get_corruption_options(wildcards):
    """The config settings a corruption takes (``geometric.border`` for the geometric ones
    that uncover a border; none for the others)."""
    taken = corruption_options(wildcards.corruption)
    return canonical({key: config["geometric"][key] for key in taken})


def get_image_encoding(wildcards):
    encoding = {k: config["storage"][k] for k in ("image_format", "jpeg_quality")}
    return canonical(encoding)
