# On demand, `snakemake hf_dataset`: every subset of the run as one Hugging Face dataset
# (Parquet, one configuration per perturbation x severity) with a dataset card and
# lmms-eval tasks (docs/interop.md). Not part of `all`: it holds every image once more.
rule export_huggingface:
    input:
        unpack(PLAN.export.export_input),
    output:
        directory("results/{dataset}/huggingface"),
    log:
        "logs/{dataset}/export_huggingface.log",
    benchmark:
        "benchmarks/out/{dataset}/export_huggingface.tsv"
    threads: 1
    params:
        code=PLAN.code("export_huggingface"),
        entries=PLAN.export.entries,
        facts=PLAN.export.facts,
    script:
        "../workflow/scripts/export_huggingface.py"


rule hf_dataset:
    input:
        f"results/{PLAN.dataset}/huggingface",
    localrule: True
