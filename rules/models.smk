rule train_model:
    input:
        unpack(PLAN.models.train_input),
    output:
        directory("resources/models/{dataset}/{model}"),
    log:
        "logs/{dataset}/train_model/{model}.log",
    benchmark:
        "benchmarks/out/{dataset}/train_model/{model}.tsv"
    threads: config["threads"]["train"]
    params:
        code=PLAN.code("train_model"),
        train=PLAN.models.train_params,
    script:
        "../workflow/scripts/train_model.py"
