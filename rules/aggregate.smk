rule load_duckdb:
    input:
        unpack(get_context_input),
        unpack(get_vqabq_input),
        questions="resources/datasets/{dataset}/eval/questions.parquet",
        info="resources/datasets/{dataset}/eval/dataset.json",
        predictions=get_prediction_files,
        question_sets=get_all_question_sets,
        images=get_image_folders,
        attention=get_attention_files,
    output:
        "results/{dataset}/robustness.duckdb",
    log:
        "logs/{dataset}/load_duckdb.log",
    benchmark:
        "benchmarks/out/{dataset}/load_duckdb.tsv"
    localrule: True
    params:
        metric=config["scoring"]["metric"],
        preferences=get_vre_preferences,
        families=get_families,
        rscore=canonical(config["rscore"]),
        uncertainty=canonical(config["uncertainty"]),
        skipped=SKIPPED_TEXT | SKIPPED_RANKERS,
        image_subsets=get_image_subsets,
        seed=config["seed"],
        outside_metrics=get_outside_metrics,
        vqabq=get_vqabq_params,
        feature_sources=FEATURE_SOURCES,
    script:
        "../workflow/scripts/load_duckdb.py"
