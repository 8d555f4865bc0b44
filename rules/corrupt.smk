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
        engine=get_corruption_engine,
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


# Where each eval image's objects are and which its questions depend on: the boxes that
# object_crop keeps in frame and occlude_context leaves uncovered (scene graphs, COCO
# instances or GQA's graphs; docs/corruptions.md, "Box-aware corruptions").
rule object_boxes:
    input:
        unpack(get_box_sources),
        questions="resources/datasets/{dataset}/eval/questions.parquet",
    output:
        "results/{dataset}/boxes.parquet",
    log:
        "logs/{dataset}/object_boxes.log",
    benchmark:
        "benchmarks/out/{dataset}/object_boxes.tsv"
    threads: 1
    params:
        settings=get_box_params,
        code=BOX_CODE,
    script:
        "../workflow/scripts/object_boxes.py"
