# Input functions and params of rules/corrupt.smk.


def get_corrupt_input(wildcards):
    inputs = {"images": f"resources/datasets/{DATASET}/eval/images"}
    if wildcards.corruption == "stylize":
        stylize = config["stylize"]
        inputs.update(weights=user_path(stylize["weights"]), styles=user_path(stylize["styles"]))
    return inputs


def get_stylize_params(wildcards):
    """The stylize settings for its own jobs (none for other corruptions)."""
    if wildcards.corruption != "stylize":
        return {}
    return canonical({"style_size": config["stylize"]["style_size"]})


def get_image_encoding(wildcards):
    encoding = {k: config["storage"][k] for k in ("image_format", "jpeg_quality")}
    return canonical(encoding)
