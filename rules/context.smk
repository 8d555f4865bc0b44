# Visual context (SwapMix, docs/context.md): one job swaps the context objects of every
# question of the eval split and writes the swapped images, the swap table and one
# question set per context perturbation (every swap index in one file). Scenes are
# re-rendered; VQAv2 images get another COCO instance pasted into a context object's box.
rule swap_context:
    input:
        unpack(PLAN.context.context_sources),
        questions="resources/datasets/{dataset}/eval/questions.parquet",
    output:
        images=directory("results/{dataset}/context/images"),
        swaps="results/{dataset}/context/swaps.parquet",
        sets=expand(
            "results/{{dataset}}/context/{perturbation}.parquet",
            perturbation=PLAN.context_perturbations,
        ),
    log:
        "logs/{dataset}/swap_context.log",
    benchmark:
        "benchmarks/out/{dataset}/swap_context.tsv"
    threads: 1
    params:
        code=PLAN.code("swap_context"),
        settings=PLAN.context.context_params,
        runtime=PLAN.shards,
    script:
        "../workflow/scripts/swap_context.py"
