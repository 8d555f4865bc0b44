rule prepare_dataset:
    output:
        questions="resources/datasets/{dataset}/{split}/questions.parquet",
        images=directory("resources/datasets/{dataset}/{split}/images"),
    log:
        "logs/{dataset}/prepare_dataset/{split}.log",
    benchmark:
        "benchmarks/out/{dataset}/prepare_dataset/{split}.tsv"
    params:
        adapter=config["dataset"]["adapter"],
        seed=config["seed"],
        shard_mb=config["storage"]["shard_mb"],
        selection=get_dataset_params,
    conda:
        "../envs/vqarobust.yaml"
    script:
        "../workflow/scripts/prepare_dataset.py"
