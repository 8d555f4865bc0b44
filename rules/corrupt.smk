rule corrupt_images:
    input:
        "resources/datasets/{dataset}/eval/images",
    output:
        directory("results/{dataset}/images/{corruption}/{severity}"),
    log:
        "logs/{dataset}/corrupt_images/{corruption}/{severity}.log",
    benchmark:
        "benchmarks/out/{dataset}/corrupt_images/{corruption}/{severity}.tsv"
    params:
        seed=config["seed"],
        storage=config["storage"],
        engine=ENGINE_VERSION,
    threads: 1
    conda:
        "../envs/vqarobust.yaml"
    script:
        "../workflow/scripts/corrupt_images.py"
