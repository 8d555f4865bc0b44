rule corrupt_images:
    input:
        unpack(PLAN.corrupt.corrupt_input),
    output:
        directory("results/{dataset}/images/{corruption}/{severity}"),
    log:
        "logs/{dataset}/corrupt_images/{corruption}/{severity}.log",
    benchmark:
        "benchmarks/out/{dataset}/corrupt_images/{corruption}/{severity}.tsv"
    threads: 1
    params:
        code=PLAN.code("corrupt_images"),
        seed=config["seed"],
        encoding=PLAN.corrupt.image_encoding,
        stylize=PLAN.corrupt.stylize_params,
        options=PLAN.corrupt.corruption_options,
        ssim=PLAN.corrupt.ssim_params,
        runtime=PLAN.shards,
    script:
        "../workflow/scripts/corrupt_images.py"


# LPIPS of one corrupted subset's images against their clean images (with lpips set).
rule score_lpips:
    input:
        unpack(PLAN.corrupt.lpips_input),
    output:
        "results/{dataset}/quality/lpips/{corruption}/{severity}.parquet",
    log:
        "logs/{dataset}/score_lpips/{corruption}/{severity}.log",
    benchmark:
        "benchmarks/out/{dataset}/score_lpips/{corruption}/{severity}.tsv"
    threads: 1
    params:
        code=PLAN.code("score_lpips"),
    script:
        "../workflow/scripts/score_lpips.py"


# Where each eval image's objects are and which its questions depend on: the boxes that
# object_crop keeps in frame and occlude_context leaves uncovered (scene graphs, COCO
# instances or GQA's graphs; docs/corruptions.md, "Box-aware corruptions").
rule object_boxes:
    input:
        unpack(PLAN.corrupt.box_sources),
        questions="resources/datasets/{dataset}/eval/questions.parquet",
    output:
        "results/{dataset}/boxes.parquet",
    log:
        "logs/{dataset}/object_boxes.log",
    benchmark:
        "benchmarks/out/{dataset}/object_boxes.tsv"
    threads: 1
    params:
        code=PLAN.code("object_boxes"),
        settings=PLAN.corrupt.box_params,
    script:
        "../workflow/scripts/object_boxes.py"
