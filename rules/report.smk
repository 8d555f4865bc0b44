from vqarobust.report.outputs import FIGURES as REPORT_FIGURES
from vqarobust.report.outputs import LATEX_TABLES as REPORT_LATEX
from vqarobust.report.outputs import TABLES as REPORT_TABLES

# Figure captions: package data, shared by the HTML report and Snakemake's native report.
CAPTIONS = "../src/vqarobust/report/captions"


# Every file of the report is a declared output; the figures are report() items with the
# captions the HTML shows too, so `snakemake --report report.zip` gives the native report.
rule render_report:
    input:
        "results/{dataset}/robustness.duckdb",
    output:
        html=report(
            "results/{dataset}/report/index.html",
            caption=f"{CAPTIONS}/index.rst",
            category="Report",
        ),
        figures=[
            report(
                f"results/{{dataset}}/report/figures/{name}.png",
                caption=f"{CAPTIONS}/{name}.rst",
                category="Figures",
            )
            for name in REPORT_FIGURES
        ],
        svg=expand("results/{{dataset}}/report/figures/{name}.svg", name=REPORT_FIGURES),
        tables=expand("results/{{dataset}}/report/tables/{name}.csv", name=REPORT_TABLES),
        latex=expand("results/{{dataset}}/report/tables/{name}.tex", name=REPORT_LATEX),
    log:
        "logs/{dataset}/render_report.log",
    benchmark:
        "benchmarks/out/{dataset}/render_report.tsv"
    localrule: True
    params:
        code=PLAN.code("render_report"),
    script:
        "../workflow/scripts/render_report.py"
