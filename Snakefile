# vqarobust: how robust are VQA models to image corruptions?
# docs/workflow.md describes the rules; docs/paper.md the paper protocol and clusters.
# Stages live in rules/<stage>.smk; their input functions and params are calls into the
# study plan (PLAN, vqarobust.plan), built in rules/common.smk.
from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


include: "rules/common.smk"
include: "rules/datasets.smk"
include: "rules/models.smk"
include: "rules/corrupt.smk"
include: "rules/text.smk"
include: "rules/context.smk"
include: "rules/features.smk"
include: "rules/infer.smk"
include: "rules/analyze.smk"
include: "rules/report.smk"
include: "rules/export.smk"


# Aggregation and the report take seconds: never worth a cluster job. `localrule: True`
# in each rule, not a localrules list: the names of a list miss a module's prefix.
rule all:
    default_target: True
    input:
        PLAN.final_outputs,
    localrule: True


REPORT = f"results/{PLAN.dataset}/report/index.html"


# Only after a run that ended well; "Nothing to be done" leaves the report where it was.
onsuccess:
    print(f"Report: {REPORT}")
