# Input functions and params of rules/datasets.smk (a separate file: Snakemake's linter
# wants rules and functions apart).


def get_dataset_input(wildcards):
    inputs = dataset_job(config["dataset"], wildcards.split, config["seed"])[0]
    return {key: user_path(path) for key, path in inputs.items()}


def get_dataset_params(wildcards):
    return dataset_job(config["dataset"], wildcards.split, config["seed"])[1]
