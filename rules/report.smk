rule render_report:
    input:
        "results/{dataset}/robustness.duckdb",
    output:
        report(
            "results/{dataset}/report/index.html",
            caption="../workflow/report/index.rst",
            category="Report",
        ),
    log:
        "logs/{dataset}/render_report.log",
    benchmark:
        "benchmarks/out/{dataset}/render_report.tsv"
    script:
        "../workflow/scripts/render_report.py"
