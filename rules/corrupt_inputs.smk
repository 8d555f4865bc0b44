# Input functions and params of rules/corrupt.smk.


def get_corrupt_input(wildcards):
    inputs = {"images": f"resources/datasets/{DATASET}/eval/images"}
    if wildcards.corruption == "stylize":
        stylize = config["stylize"]
        inputs.update(weights=user_path(stylize["weights"]), styles=user_path(stylize["styles"]))
    return inputs


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
