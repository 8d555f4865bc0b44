# Input functions and params of rules/text.smk (question perturbations, rewrites, basic
# questions and VQABQ's chain).
from vqarobust.code_digest import code_digest

# The ranking code (the paper mode's solver included): an edit to it reranks.
RANKING_CODE = code_digest("vqarobust.text.ranking")


def get_ranking_code(wildcards):
    """The ranking code's digest; for a plugin's ranker, with its source's digest too."""
    return perturbation_engine(RANKING_CODE, wildcards.ranker)


def get_text_engine(wildcards):
    return perturbation_engine(text.TEXT_ENGINE_VERSION, wildcards.perturbation)


def get_text_params(wildcards):
    t = config["text"]
    # A perturbation of a level the filter leaves alone is unfiltered, as with it off.
    filtered = text.level(wildcards.perturbation) in t["filter_levels"]
    params = {"min_similarity": t["min_similarity"] if filtered else None,
              "max_tries": t["max_tries"]}  # fmt: skip
    if params["min_similarity"] is not None:
        # Only a filter that runs can drop a question or use another encoder.
        params |= {k: t[k] for k in ("on_low_similarity", "similarity_encoder")}
    return canonical(params)


def get_text_rates(wildcards):
    """How much a perturbation changes per severity (vqarobust.text.tokens.Rates)."""
    t = config["text"]
    return canonical({k: t[k] for k in ("word_share", "char_share", "char_min_length")})


def get_sentence_params(wildcards):
    """What can change a rewrite: the models, prompts and generation length."""
    settings = dict(config["text"]["sentence"][wildcards.sentence])
    for key in SENTENCE_RUNTIME:
        settings.pop(key, None)
    return canonical(settings)


def get_sentence_sampled(wildcards):
    """A sampled rewrite's seed and fidelity filter (empty for a greedy one: neither can
    change it)."""
    if config["text"]["sentence"][wildcards.sentence].get("sampling") is None:
        return {}
    t = config["text"]
    fidelity = {}
    if t["min_similarity"] is not None and "sentence" in t["filter_levels"]:
        keys = ("min_similarity", "max_tries", "on_low_similarity", "similarity_encoder")
        fidelity = {k: t[k] for k in keys}
    return canonical({"seed": config["seed"], "fidelity": fidelity})


# A rewriter's batch and whether it may download: they never change a rewrite.
SENTENCE_RUNTIME = ("batch_size", "allow_download")


def get_sentence_runtime(wildcards):
    settings = config["text"]["sentence"][wildcards.sentence]
    return Runtime({k: settings[k] for k in SENTENCE_RUNTIME if k in settings})


def get_sentence_gpus(wildcards):
    return 1 if config["text"]["sentence"][wildcards.sentence].get("device") == "cuda" else 0


def get_encoder_params(wildcards):
    """The sentence encoder's identity: what can change any embedding."""
    return canonical(text.encoder.identity(BQ["encoder"]))


def get_pool_input(wildcards):
    """The pool tables (one per source, each encoded once)."""
    return expand(
        "results/{dataset}/questions/pool/{source}.parquet", dataset=DATASET, source=POOL_SOURCES
    )


def get_pool_source_input(wildcards):
    spec = POOL_SOURCES[wildcards.source]
    if spec["split"] is not None:
        return {"questions": f"resources/datasets/{DATASET}/{spec['split']}/questions.parquet"}
    inputs = {"questions": user_path(spec["questions"])}
    if spec["annotations"]:
        inputs["annotations"] = user_path(spec["annotations"])
    return inputs


def get_ranking_params(wildcards):
    # Only the LASSO ranker reads its mode, alpha, lambda and pre-filter.
    # exclude_main only when not the default, so that existing rankings keep their params.
    base = {"k": BQ["k"]} | (
        {"exclude_main": BQ["exclude_main"]} if BQ["exclude_main"] != "own" else {}
    )
    name = text.ranking.ranker_name(wildcards.ranker)
    if name.startswith("bleu"):
        return canonical(base | {"bleu_smoothing": BQ["bleu_smoothing"]})
    if name != "lasso":
        return canonical(base)
    lasso = BQ["lasso"]
    keys = base | {"lasso_mode": lasso["mode"]}
    if lasso["mode"] == "paper":
        keys["lasso_lambda"] = lasso["lambda"]
    else:
        keys |= {"lasso_alpha": BQ["lasso_alpha"], "prefilter": BQ["prefilter"]}
    return canonical(keys)


def get_chain_sets(model):
    return [f"results/{DATASET}/questions/{CHAIN}/{model}/{n}.parquet" for n in VQABQ_N]


def get_chain_input(wildcards):
    return {
        "questions": f"resources/datasets/{DATASET}/eval/questions.parquet",
        "rankings": f"results/{DATASET}/questions/rankings/{BQ['vqabq']['ranker']}.parquet",
    }


def get_chain_prompt(wildcards):
    entry = config["models"][wildcards.model]
    if entry["family"] not in GENERATIVE:
        return text.ranking.CONCAT_PROMPT
    return entry.get("chain_prompt", text.ranking.DEFAULT_CHAIN_PROMPT)
