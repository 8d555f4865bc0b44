# run_model: one model answers every severity of its subsets, loading its weights once per
# job. A job per model by default, which then draws the model's attention maps with the
# same weights; per (model, subset) with inference_jobs: subset, which a cluster spreads
# over GPUs, and image_attention draws the maps (docs/workflow.md, "Inference jobs").
# Either way a subset's finished chunks are reused by content. GPUs, memory and time come from the model entry;
# threads from threads.infer, a GPU job's capped at its share of a local run's cores
# (vqarobust.plan.models.gpu_job_threads), so that --resources gpu=N runs N at once.
# _gpus repeats gpu for AWS Batch's plugin, which reads only that name (docs/cloud.md).
if PLAN.infer.per_model:

    rule run_model:
        input:
            unpack(PLAN.infer.job_input),
        output:
            **PLAN.infer.model_outputs(),
        log:
            "logs/{dataset}/run_model/{model}.log",
        benchmark:
            "benchmarks/out/{dataset}/run_model/{model}.tsv"
        threads: PLAN.models.model_threads
        resources:
            **PLAN.models.served_resources(),
            gpu=PLAN.models.model_gpus,
            _gpus=PLAN.models.model_gpus,
            gpu_model=PLAN.models.model_gpu_model,
            gpu_memory_gb=PLAN.models.model_gpu_memory,
            mem_mb=PLAN.models.model_mem_mb,
            runtime=PLAN.models.model_runtime,
        params:
            code=PLAN.code("run_model"),
            spec=PLAN.models.model_spec,
            subsets=PLAN.infer.job_params,
            attention=PLAN.infer.attention_params,
            runtime=PLAN.models.model_runtime_options,
        script:
            "../workflow/scripts/run_model.py"

else:

    rule run_model:
        input:
            unpack(PLAN.infer.job_input),
        output:
            "results/{dataset}/predictions/{model}/{subset}.parquet",
        log:
            "logs/{dataset}/run_model/{model}/{subset}.log",
        benchmark:
            "benchmarks/out/{dataset}/run_model/{model}/{subset}.tsv"
        threads: PLAN.models.model_threads
        resources:
            **PLAN.models.served_resources(),
            gpu=PLAN.models.model_gpus,
            _gpus=PLAN.models.model_gpus,
            gpu_model=PLAN.models.model_gpu_model,
            gpu_memory_gb=PLAN.models.model_gpu_memory,
            mem_mb=PLAN.models.model_mem_mb,
            runtime=PLAN.models.model_runtime,
        params:
            code=PLAN.code("run_model"),
            spec=PLAN.models.model_spec,
            subsets=PLAN.infer.job_params,
            runtime=PLAN.models.model_runtime_options,
        script:
            "../workflow/scripts/run_model.py"

    # With per-subset inference, one job per model that exposes attention over the image:
    # maps of a few questions on the clean and every corrupted image (docs/metrics.md,
    # "Attention shift").
    rule image_attention:
        input:
            unpack(PLAN.infer.attention_input),
        output:
            "results/{dataset}/attention/{model}.parquet",
        log:
            "logs/{dataset}/image_attention/{model}.log",
        benchmark:
            "benchmarks/out/{dataset}/image_attention/{model}.tsv"
        threads: PLAN.models.attention_threads
        resources:
            gpu=PLAN.models.model_gpus,
            _gpus=PLAN.models.model_gpus,
            gpu_model=PLAN.models.model_gpu_model,
            gpu_memory_gb=PLAN.models.model_gpu_memory,
            mem_mb=PLAN.models.model_mem_mb,
            runtime=PLAN.models.model_runtime,
        params:
            code=PLAN.code("image_attention"),
            spec=PLAN.models.model_spec,
            subsets=PLAN.infer.attention_subsets,
            n=config["diagnostics"]["attention"]["n"],
            seed=config["seed"],
            runtime=PLAN.models.model_runtime_options,
        script:
            "../workflow/scripts/image_attention.py"
