from vqarobust.plan import alternatives
from vqarobust.runtime import Runtime

# Every analysis (vqarobust.analyses) is its own job writing Parquet tables; load_duckdb
# only assembles them. Each job's params are its frozen settings and the digest of the
# package code it runs, so a setting or a code change reruns exactly the analyses it
# touches (docs/workflow.md, "What reruns when"). Input functions: vqarobust.plan.analyze.


rule analyze:
    input:
        unpack(PLAN.analyze.analysis_input),
    output:
        directory("results/{dataset}/tables/{analysis}"),
    log:
        "logs/{dataset}/analyze/{analysis}.log",
    benchmark:
        "benchmarks/out/{dataset}/analyze/{analysis}.tsv"
    wildcard_constraints:
        analysis=alternatives(PLAN.analyze.analyses),
    localrule: True
    params:
        settings=PLAN.analyze.analysis_settings,
        code=PLAN.analyze.analysis_code,
    script:
        "../workflow/scripts/analyze.py"


rule load_duckdb:
    input:
        tables=PLAN.analyze.tables_dirs(),
        questions="resources/datasets/{dataset}/eval/questions.parquet",
        info="resources/datasets/{dataset}/eval/dataset.json",
        predictions=PLAN.infer.prediction_files,
    output:
        "results/{dataset}/robustness.duckdb",
    log:
        "logs/{dataset}/load_duckdb.log",
    benchmark:
        "benchmarks/out/{dataset}/load_duckdb.tsv"
    localrule: True
    params:
        seed=config["seed"],
        code=PLAN.code("load_duckdb"),
        # Only hashed into provenance (the run that wrote the file): the runtime channel,
        # so that a setting no table depends on reruns nothing.
        runtime=Runtime({"config": config}),
    script:
        "../workflow/scripts/load_duckdb.py"
