# Region features for feature models (LXMERT, docs/context.md "Feature models"): a
# detector-like CNN trained on the train split's objects, one feature table per clean
# split and per corrupted image folder, and the feature-level SwapMix swaps of the eval
# split (rows swapped, nothing rendered).
rule train_detector:
    input:
        images="resources/datasets/{dataset}/train/images",
    output:
        directory("resources/detectors/{dataset}/{feature}"),
    log:
        "logs/{dataset}/train_detector/{feature}.log",
    benchmark:
        "benchmarks/out/{dataset}/train_detector/{feature}.tsv"
    threads: config["threads"]["train"]
    params:
        code=PLAN.code("train_detector"),
        settings=PLAN.features.detector_params,
    script:
        "../workflow/scripts/train_detector.py"


rule extract_features:
    input:
        unpack(PLAN.features.feature_input),
    output:
        "resources/features/{dataset}/{feature}/{split}.parquet",
    log:
        "logs/{dataset}/extract_features/{feature}/{split}.log",
    benchmark:
        "benchmarks/out/{dataset}/extract_features/{feature}/{split}.tsv"
    threads: 1
    params:
        code=PLAN.code("extract_features"),
        settings=PLAN.features.feature_params,
    script:
        "../workflow/scripts/extract_features.py"


# Detector features of corrupted images: the crops come from the corrupted pixels.
rule extract_image_features:
    input:
        images="results/{dataset}/images/{corruption}/{severity}",
        detector=lambda wildcards: PLAN.features.detector_dir(wildcards.feature),
    output:
        "results/{dataset}/features/{feature}/{corruption}/{severity}.parquet",
    log:
        "logs/{dataset}/extract_image_features/{feature}/{corruption}/{severity}.log",
    benchmark:
        "benchmarks/out/{dataset}/extract_image_features/{feature}/{corruption}/{severity}.tsv"
    threads: 1
    params:
        code=PLAN.code("extract_image_features"),
        settings=PLAN.features.feature_params,
    script:
        "../workflow/scripts/extract_features.py"


rule swap_features:
    input:
        unpack(PLAN.features.swap_features_input),
    output:
        swaps="results/{dataset}/context/features/{feature}/swaps.parquet",
        sets=expand(
            "results/{{dataset}}/context/features/{{feature}}/{perturbation}.parquet",
            perturbation=PLAN.context_perturbations,
        ),
    log:
        "logs/{dataset}/swap_features/{feature}.log",
    benchmark:
        "benchmarks/out/{dataset}/swap_features/{feature}.tsv"
    threads: 1
    params:
        code=PLAN.code("swap_features"),
        settings=PLAN.features.swap_features_params,
    script:
        "../workflow/scripts/swap_features.py"
