# One job per (model, subset): the model loads once and answers every severity of the
# subset ("clean" is severity 0 alone). GPUs, memory and time come from the model entry.
rule run_model:
    input:
        unpack(get_infer_input),
    output:
        "results/{dataset}/predictions/{model}/{subset}.parquet",
    log:
        "logs/{dataset}/run_model/{model}/{subset}.log",
    benchmark:
        "benchmarks/out/{dataset}/run_model/{model}/{subset}.tsv"
    threads: config["threads"]["infer"]
    resources:
        gpu=get_model_gpus,
        gpu_model=get_model_gpu_model,
        gpu_memory_gb=get_model_gpu_memory,
        mem_mb=get_model_mem_mb,
        runtime=get_model_runtime,
    params:
        spec=get_model_spec,
        code=get_model_code,
        severities=get_subset_severities,
        modality=get_modality,
        runtime=get_model_runtime_options,
    script:
        "../workflow/scripts/run_model.py"


# One job per model that exposes attention over the image: maps of a few questions on the
# clean and every corrupted image (docs/metrics.md, "Attention shift").
rule image_attention:
    input:
        unpack(get_attention_input),
    output:
        "results/{dataset}/attention/{model}.parquet",
    log:
        "logs/{dataset}/image_attention/{model}.log",
    benchmark:
        "benchmarks/out/{dataset}/image_attention/{model}.tsv"
    threads: config["threads"]["infer"]
    resources:
        gpu=get_model_gpus,
        gpu_model=get_model_gpu_model,
        gpu_memory_gb=get_model_gpu_memory,
        mem_mb=get_model_mem_mb,
        runtime=get_model_runtime,
    params:
        spec=get_model_spec,
        code=get_model_code,
        subsets=get_attention_subsets,
        n=config["diagnostics"]["attention"]["n"],
        seed=config["seed"],
        runtime=get_model_runtime_options,
    script:
        "../workflow/scripts/image_attention.py"
