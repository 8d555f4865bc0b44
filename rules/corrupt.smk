rule corrupt_images:
    input:
        unpack(get_corrupt_input),
    output:
        directory("results/{dataset}/images/{corruption}/{severity}"),
    log:
        "logs/{dataset}/corrupt_images/{corruption}/{severity}.log",
    benchmark:
        "benchmarks/out/{dataset}/corrupt_images/{corruption}/{severity}.tsv"
    threads: 1
    params:
        seed=config["seed"],
        encoding=get_image_encoding,
        engine=ENGINE_VERSION,
        stylize=get_stylize_params,
        options=get_corruption_options,
        runtime=SHARDS,
    script:
        "../workflow/scripts/corrupt_images.py"


# LPIPS of one corrupted subset's images against their clean images (with lpips set).
rule score_lpips:
    input:
        unpack(get_lpips_input),
    output:
        "results/{dataset}/quality/lpips/{corruption}/{severity}.parquet",
    log:
        "logs/{dataset}/score_lpips/{corruption}/{severity}.log",
    benchmark:
        "benchmarks/out/{dataset}/score_lpips/{corruption}/{severity}.tsv"
    threads: 1
    script:
        "../workflow/scripts/score_lpips.py"
