rule prepare_dataset:
    input:
        unpack(get_dataset_input),
    output:
        questions="resources/datasets/{dataset}/{split}/questions.parquet",
        images=directory("resources/datasets/{dataset}/{split}/images"),
        manifest="resources/datasets/{dataset}/{split}/manifest.txt",
        info="resources/datasets/{dataset}/{split}/dataset.json",
    log:
        "logs/{dataset}/prepare_dataset/{split}.log",
    benchmark:
        "benchmarks/out/{dataset}/prepare_dataset/{split}.tsv"
    params:
        adapter=config["dataset"]["adapter"],
        selection=get_dataset_params,
        runtime=SHARDS,
    script:
        "../workflow/scripts/prepare_dataset.py"
