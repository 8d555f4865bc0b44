# Input functions and params of rules/context.smk (SwapMix on pixels).


def get_context_params(wildcards):
    """What changes the swaps: seeds, k, the objects per question, the perturbations (ordered as the rule's outputs),
    the scenes split or, on VQAv2, the smallest instance and the storage encoding."""
    dataset, context = config["dataset"], config["context"]
    settings = {
        "perturbations": CONTEXT,
        "seed": config["seed"],
        "k": context["k"],
        "max_objects": context["max_objects"],
    }
    if dataset["adapter"] == "scenes":
        settings.update(scene_seed=dataset.get("scene_seed", 0), split=dataset["split"])
    else:
        encoding = config["storage"]
        settings.update(
            min_area=context["min_area"],
            image_format=encoding["image_format"],
            jpeg_quality=encoding["jpeg_quality"],
        )
    return settings


def get_context_sources(wildcards):
    """VQAv2: the clean images, the COCO images (donors) and the instance annotations."""
    if config["dataset"]["adapter"] != "vqav2":
        return {}
    return {
        "clean": f"resources/datasets/{DATASET}/eval/images",
        "source": user_path(config["dataset"]["images"]),
        "instances": user_path(config["context"]["instances"]),
    }
