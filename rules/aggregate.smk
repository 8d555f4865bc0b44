rule load_duckdb:
    input:
        questions="resources/datasets/{dataset}/eval/questions.parquet",
        info="resources/datasets/{dataset}/eval/dataset.json",
        predictions=get_prediction_files,
    output:
        "results/{dataset}/robustness.duckdb",
    log:
        "logs/{dataset}/load_duckdb.log",
    benchmark:
        "benchmarks/out/{dataset}/load_duckdb.tsv"
    params:
        metric=config["scoring"]["metric"],
        preferences=get_vre_preferences,
        families=get_families,
        rscore=canonical(config["rscore"]),
    script:
        "../workflow/scripts/load_duckdb.py"
