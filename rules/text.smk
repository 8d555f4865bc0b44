# Question perturbations: one job per text perturbation writes all its severities. Basic
# questions: one job encodes every distinct question of the eval split and the pool once,
# one job per ranker ranks the basic questions of each distinct question once, and one
# job per ranker writes its noise levels.
rule perturb_questions:
    input:
        questions="resources/datasets/{dataset}/eval/questions.parquet",
    output:
        expand(
            "results/{{dataset}}/questions/{{perturbation}}/{severity}.parquet",
            severity=PLAN.severities,
        ),
    log:
        "logs/{dataset}/perturb_questions/{perturbation}.log",
    benchmark:
        "benchmarks/out/{dataset}/perturb_questions/{perturbation}.tsv"
    threads: 1
    params:
        code=PLAN.code("perturb_questions"),
        seed=config["seed"],
        severities=PLAN.severities,
        fidelity=PLAN.text.text_params,
        rates=PLAN.text.text_rates,
    script:
        "../workflow/scripts/perturb_questions.py"


# Sentence-level rewrites, only for the models text.sentence names (docs/text.md).
rule rewrite_questions:
    input:
        questions="resources/datasets/{dataset}/eval/questions.parquet",
    output:
        "results/{dataset}/questions/{sentence}/1.parquet",
    log:
        "logs/{dataset}/rewrite_questions/{sentence}.log",
    benchmark:
        "benchmarks/out/{dataset}/rewrite_questions/{sentence}.tsv"
    threads: 1
    resources:
        gpu=PLAN.text.sentence_gpus,
        _gpus=PLAN.text.sentence_gpus,
    params:
        code=PLAN.code("rewrite_questions"),
        settings=PLAN.text.sentence_params,
        runtime=PLAN.text.sentence_runtime,
        sampled=PLAN.text.sentence_sampled,
    script:
        "../workflow/scripts/rewrite_questions.py"


rule embed_questions:
    input:
        questions="resources/datasets/{dataset}/eval/questions.parquet",
    output:
        "results/{dataset}/questions/rankings/embeddings.parquet",
    log:
        "logs/{dataset}/embed_questions.log",
    benchmark:
        "benchmarks/out/{dataset}/embed_questions.tsv"
    threads: 1
    params:
        code=PLAN.code("embed_questions"),
        encoder=PLAN.text.encoder_params,
        encoder_path=PLAN.bq["encoder"],
        runtime=PLAN.text.encoder_runtime,
    script:
        "../workflow/scripts/embed_questions.py"


# One pool source (a prepared split or a pool file): deduplicated, marked yes/no and
# encoded once, whatever rankers or models are added later.
rule embed_pool:
    input:
        unpack(PLAN.text.pool_source_input),
    output:
        "results/{dataset}/questions/pool/{source}.parquet",
    log:
        "logs/{dataset}/embed_pool/{source}.log",
    benchmark:
        "benchmarks/out/{dataset}/embed_pool/{source}.tsv"
    threads: 1
    params:
        code=PLAN.code("embed_pool"),
        encoder=PLAN.text.encoder_params,
        encoder_path=PLAN.bq["encoder"],
        runtime=PLAN.text.encoder_runtime,
    script:
        "../workflow/scripts/embed_pool.py"


rule rank_basic_questions:
    input:
        questions="resources/datasets/{dataset}/eval/questions.parquet",
        pool=PLAN.text.pool_input,
        embeddings="results/{dataset}/questions/rankings/embeddings.parquet",
    output:
        "results/{dataset}/questions/rankings/{ranker}.parquet",
    log:
        "logs/{dataset}/rank_basic_questions/{ranker}.log",
    benchmark:
        "benchmarks/out/{dataset}/rank_basic_questions/{ranker}.tsv"
    threads: 1
    params:
        code=PLAN.code("rank_basic_questions"),
        ranking=PLAN.text.ranking_params,
    script:
        "../workflow/scripts/rank_basic_questions.py"


# Each basic-question dataset in the paper's structure: per main question its ranked
# basic questions and scores (docs/text.md).
rule export_basic_questions:
    input:
        questions="resources/datasets/{dataset}/eval/questions.parquet",
        rankings="results/{dataset}/questions/rankings/{ranker}.parquet",
    output:
        parquet="results/{dataset}/basic_questions/{ranker}.parquet",
        json="results/{dataset}/basic_questions/{ranker}.json",
    log:
        "logs/{dataset}/export_basic_questions/{ranker}.log",
    benchmark:
        "benchmarks/out/{dataset}/export_basic_questions/{ranker}.tsv"
    threads: 1
    params:
        code=PLAN.code("export_basic_questions"),
    script:
        "../workflow/scripts/export_basic_questions.py"


rule noise_questions:
    input:
        questions="resources/datasets/{dataset}/eval/questions.parquet",
        rankings="results/{dataset}/questions/rankings/{ranker}.parquet",
    output:
        expand(
            "results/{{dataset}}/questions/{{ranker}}/{level}.parquet",
            level=PLAN.bq_levels,
        ),
    log:
        "logs/{dataset}/noise_questions/{ranker}.log",
    benchmark:
        "benchmarks/out/{dataset}/noise_questions/{ranker}.tsv"
    threads: 1
    params:
        code=PLAN.code("noise_questions"),
        levels=PLAN.bq_levels,
    script:
        "../workflow/scripts/noise_questions.py"


# VQABQ's question sets for one model: each question with its first 1, 2, 3 basic
# questions (a generative or chat model's chain_prompt, else the direct concatenation).
rule chain_questions:
    input:
        unpack(PLAN.text.chain_input),
    output:
        expand(
            "results/{{dataset}}/questions/{chain}/{{model}}/{n}.parquet",
            chain=PLAN.chain,
            n=PLAN.vqabq_n,
        ),
    log:
        "logs/{dataset}/chain_questions/{model}.log",
    benchmark:
        "benchmarks/out/{dataset}/chain_questions/{model}.tsv"
    threads: 1
    params:
        code=PLAN.code("chain_questions"),
        prompt=PLAN.text.chain_prompt,
    script:
        "../workflow/scripts/chain_questions.py"
