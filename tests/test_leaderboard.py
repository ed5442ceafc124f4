"""shaberi leaderboard: a narrow terminal table, the wide table in the exports, run families ranked by their mean
with the 95 % t-interval, the GPT-4 columns only with a GPT-4 judge, and the .xlsx workbook, over the real
command line."""

from __future__ import annotations

import csv
import io
import json
import statistics

import openpyxl
import pytest
from scipy import stats

from .conftest import in_terminal, query, shaberi, write_rakuda
from .test_status import run

POOLED = ["model_name", "Judges", "Average (All)", "ELYZA 100 (All)", "JA-MT (All)", "Rakuda (All)", "Tengu (All)",
          "% JA", "JA-MT questions", "Complete"]
BENCHMARKS = {"elyza": "ELYZA 100", "mt_bench": "JA-MT", "rakuda": "Rakuda", "tengu": "Tengu"}


@pytest.fixture(scope="module")
def legacy(tmp_path_factory, data_dir):
    """The imported legacy samples: judged by gpt-4-turbo-preview (GPT4), GPT4.1, GPT5.1 and Tulu405."""
    results = tmp_path_factory.mktemp("legacy") / "r"
    proc = shaberi("import-legacy", str(data_dir / "legacy" / "samples"), "--results-dir", str(results))
    assert proc.returncode == 0, proc.stderr
    return results


def board(results, *args: str) -> tuple[list[str], list[dict[str, str]]]:
    proc = shaberi("leaderboard", "--format", "csv", "--results-dir", str(results), *args)
    assert proc.returncode == 0, proc.stderr
    reader = csv.DictReader(io.StringIO(proc.stdout))
    return list(reader.fieldnames or []), list(reader)


def markdown_header(results, *args: str) -> list[str]:
    proc = shaberi("leaderboard", "--format", "markdown", "--results-dir", str(results), *args)
    assert proc.returncode == 0, proc.stderr
    line = next(x for x in proc.stdout.splitlines() if x.startswith("| model_name"))
    return [c.strip() for c in line.strip("|").split("|")]


def test_the_terminal_shows_the_pooled_columns_and_judges_all_the_wide_table(legacy):
    assert markdown_header(legacy) == POOLED
    wide, _ = board(legacy)  # the exports: every column, the GPT-4 comparison too (a GPT4 judge judged)
    assert len(wide) == 32 and {"Average (ex-GPT4)", "GPT4 delta", "Tengu (Tulu405)"} <= set(wide)
    assert markdown_header(legacy, "--judges", "all") == wide
    assert board(legacy, "--judges", "pooled")[0] == POOLED
    chosen = markdown_header(legacy, "--judges", "GPT4, llmjudge-tulu405")  # a title or a judge's name
    assert chosen == [*POOLED[:7], *(f"{t} ({j})" for j in ("GPT4", "Tulu405")
                                     for t in ("Average", "ELYZA 100", "JA-MT", "Rakuda", "Tengu")), *POOLED[7:]]
    table = shaberi("leaderboard", "--results-dir", str(legacy))
    assert table.returncode == 0 and "Average (All)" in table.stdout and "(GPT4" not in table.stdout
    # shares in per cent, as the workbook shows them: the csv's fraction 0.8612… reads 86.1%
    lines = shaberi("leaderboard", "--format", "markdown", "--results-dir", str(legacy)).stdout.splitlines()
    shown = {c[0]: c for c in ([x.strip() for x in line.strip("|").split("|")] for line in lines
                                if line.startswith("| ") and not line.startswith("| model_name"))}
    for row in board(legacy)[1]:
        want = f"{float(row['% JA']):.1%}" if row["% JA"] else ""
        assert shown[row["model_name"]][POOLED.index("% JA")] == want


def test_judges_all_in_a_120_column_terminal_is_a_table_per_judge_and_cuts_no_cell(legacy):
    """The wide board (32 columns) read in 120 columns: one table per judge, each beside the model names (folded
    onto more lines when long, never cut), every number of the csv shown whole."""
    wide, rows = board(legacy)
    code, shown = in_terminal("leaderboard", "--judges", "all", "--results-dir", str(legacy))
    assert code == 0, shown
    lines = shown.splitlines()
    assert max(map(len, lines)) <= 120 and "…" not in shown
    titles = [line.strip() for line in lines if line.startswith("Leaderboard: tag legacy: ")]
    assert titles == ["Leaderboard: tag legacy: All (each row's judges pooled)", *(
        f"Leaderboard: tag legacy: {t} ({j})" for t, j in (("GPT4", "gpt-4-turbo-preview"),
                                                            ("GPT4.1", "gpt-4.1-2025-04-14"),
                                                            ("GPT5.1", "gpt-5.1-2025-11-13"),
                                                            ("Tulu405", "llmjudge-tulu405"))),
        "Leaderboard: tag legacy: GPT4 comparison"]
    cells = [c.strip() for line in lines for c in line.strip("│").split("│")]
    names = "".join(c for line in lines if line.startswith("│") for c in [line.split("│")[1].strip()])
    for row in rows:
        assert row["model_name"] in names  # folded, whole
        for column in wide:
            value = row[column]
            if value and column not in ("model_name", "JA-MT questions", "Complete", "Judges"):
                want = f"{float(value):.1%}" if column in ("% JA", "GPT4 delta") else f"{float(value):.2f}"
                assert want in cells, (column, value)
    # the pooled board alone stays one table, names folded the same way
    code, pooled = in_terminal("leaderboard", "--results-dir", str(legacy))
    assert code == 0 and pooled.count("Leaderboard:") == 1 and max(map(len, pooled.splitlines())) <= 120
    # every column whole, the last one too: rich's own shrinking cropped Complete at the window's edge
    assert "…" not in pooled, pooled
    last = [line.strip("│").split("│")[-1].strip() for line in pooled.splitlines() if line.startswith("│")]
    assert "Complete ┃" in pooled and sorted(filter(None, last)) == sorted(r["Complete"] for r in rows), pooled
    # in 70 the names and the headers give way, never a number (split over two lines it reads as two)
    code, narrow = in_terminal("leaderboard", "--results-dir", str(legacy), columns=70)
    cells = {c.strip() for line in narrow.splitlines() if line.startswith("│") for c in line.split("│")}
    assert code == 0 and max(map(len, narrow.splitlines())) <= 70 and "…" not in narrow, narrow
    assert all(f"{float(r['Average (All)']):.2f}" in cells for r in rows if r["Average (All)"]), narrow
    assert all(f"{float(r['% JA']):.1%}" in cells for r in rows if r["% JA"]), narrow


def test_the_workbook_holds_the_csv_numbers_with_a_colour_scale_per_score_column(legacy, tmp_path):
    header, rows = board(legacy)
    proc = shaberi("leaderboard", "--out", str(tmp_path / "board.xlsx"), "--results-dir", str(legacy))
    assert proc.returncode == 0 and proc.stdout == f"leaderboard: {tmp_path / 'board.xlsx'}\n", proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["board.xlsx"]  # no temporary left behind
    sheet = openpyxl.load_workbook(tmp_path / "board.xlsx").active
    assert sheet is not None
    cells = [[c.value for c in row] for row in sheet.iter_rows()]
    assert cells[0] == header and len(cells) == len(rows) + 1
    numbers = 0
    for row, got in zip(rows, cells[1:], strict=True):
        for name, value in zip(header, got, strict=True):
            want = row[name]
            if want == "":
                assert value is None, name  # an empty cell, not 0 or ""
            elif name in ("model_name", "Complete"):
                assert value == want, name
            elif name == "JA-MT questions":
                assert value == int(want), name  # a number, as the csv's digits
            else:
                assert isinstance(value, int | float), (name, value)  # a number, not text
                assert value == pytest.approx(float(want), abs=1e-12), name
                numbers += 1
    assert numbers == 40  # every number of the wide table (5 models)
    # One 3-colour scale (Excel's default colours) over each score column's rows, on nothing else, and the
    # column's best value in the original's bold green.
    scaled, best = {}, {}
    for scope in sheet.conditional_formatting:
        for rule in scope.rules:
            if rule.type == "top10":
                best[str(scope.sqref)] = (rule.rank, rule.dxf.font.b, rule.dxf.font.color.rgb)
                continue
            colours = [c.rgb for c in rule.colorScale.color]
            scaled[str(scope.sqref)] = (rule.type, colours)
    last = len(rows) + 1
    scores = [i for i, n in enumerate(header) if n.startswith(("Average", *BENCHMARKS.values())) and n.endswith(")")]
    letters = [openpyxl.utils.get_column_letter(i + 1) for i in scores]
    assert scaled == {f"{c}2:{c}{last}": ("colorScale", ["FFF8696B", "FFFFEB84", "FF63BE7B"]) for c in letters}
    assert best == {f"{c}2:{c}{last}": (1, True, "FF127622") for c in letters}
    assert sheet.freeze_panes == "B2"
    assert all(c.font.b for c in sheet[1]) and sheet["D2"].number_format == "0.00"
    assert sheet.cell(2, header.index("% JA") + 1).number_format == "0.0%"
    assert sheet.column_dimensions["A"].width > len(max((r["model_name"] for r in rows), key=len))


SCALES = {"overall": (1, 10), "elyza": (2, 10), "tengu": (0, 10), "mt_bench": (1, 10), "rakuda": (1, 10)}  # on 0–10


def test_a_family_ranks_by_its_mean_with_the_t_interval_of_multi_run_stats(server, tmp_path, data_dir):
    results = tmp_path / "r"
    for model, seed in (("a", "1"), ("b", "20")):  # another seed: other answers, other scores
        assert run(server.base_url, results, data_dir, "--runs", "3", "--limit", "3", "--judge", "j", "--seed", seed,
                   tag="fam", model=model).returncode == 0
    header, rows = board(results, "--tag", "fam")
    assert "Average (ex-GPT4)" not in header and "GPT4 delta" not in header  # no GPT-4 judge
    assert header[:6] == ["model_name", "Runs", "Judges", "Average (All)", "Average (All) CI low",
                          "Average (All) CI high"]
    assert {"Runs (j)", "Rakuda (j) CI high"} <= set(header)
    averages = [float(r["Average (All)"]) for r in rows]
    assert averages == sorted(averages, reverse=True) and averages[0] != averages[1]
    expected = {(m, j, b): (mean, low, high, n) for m, j, b, mean, low, high, n in query(
        results, "SELECT model, judge, benchmark, mean, ci_low, ci_high, runs FROM multi_run_stats")}
    per_run = {}
    for m, j, b, score in query(results, "SELECT model, judge, benchmark, score FROM benchmark_scores "
                                         "WHERE tag LIKE 'fam-run%' ORDER BY run_index"):
        per_run.setdefault((m, j, b), []).append(score)
    for m, j, overall in query(results, "SELECT model, judge, overall FROM run_scores ORDER BY run_index"):
        per_run.setdefault((m, j, "overall"), []).append(overall)
    compared = 0
    for row in rows:
        assert row["Runs"] == row["Runs (j)"] == "3" and row["Judges"] == "1" and row["Complete"] == "4/4"
        for judge, title in (("*", "All"), ("j", "j")):
            for benchmark, name in [("overall", "Average"), *BENCHMARKS.items()]:
                column = f"{name} ({title})"
                got = tuple(float(row[f"{column}{s}"]) for s in ("", " CI low", " CI high"))
                mean, low, high, n = expected[(row["model_name"], judge, benchmark)]
                assert n == 3 and got == pytest.approx((mean, low, high), abs=1e-12), column
                values = per_run[(row["model_name"], judge, benchmark)]
                low_t, high_t = stats.t.interval(0.95, len(values) - 1, loc=statistics.mean(values),
                                                 scale=stats.sem(values))
                bottom, top = SCALES[benchmark]  # the interval is clipped to the scale
                # the views round to 9 decimals
                assert got == pytest.approx((statistics.mean(values), max(low_t, bottom), min(high_t, top)),
                                            abs=1e-9), column
                compared += 1
    assert compared == 20
    # The terminal: the mean ± the interval's half-width, in the score's own cell.
    proc = shaberi("leaderboard", "--tag", "fam", "--format", "markdown", "--results-dir", str(results))
    assert proc.returncode == 0 and "(mean ± 95% interval over its complete runs)" in proc.stdout
    top = rows[0]
    mean, high = float(top["Average (All)"]), float(top["Average (All) CI high"])
    assert f"| {top['model_name']} | 3 | 1 | {mean:.2f} ± {high - mean:.2f} |" in proc.stdout
    # and in a 120-column window, each judge's table beside the names: nothing cut, the last column there too
    for judges in ("pooled", "all"):
        code, shown = in_terminal("leaderboard", "--tag", "fam", "--judges", judges, "--results-dir", str(results))
        assert code == 0 and "…" not in shown and max(map(len, shown.splitlines())) <= 120, shown
        assert "Complete ┃" in shown and shown.count(" 4/4 ") == 2 and f"{mean:.2f}" in shown, shown
    assert markdown_header(results, "--tag", "fam") == [*POOLED[:1], "Runs", *POOLED[1:]]
    as_json = json.loads(shaberi("leaderboard", "--tag", "fam", "--format", "json", "--results-dir",
                                 str(results)).stdout)
    assert as_json[0]["Average (All) CI low"] == pytest.approx(float(top["Average (All) CI low"]), abs=1e-12)
    # A member's own tag is one run again: no Runs, no interval.
    header, rows = board(results, "--tag", "fam-run2")
    assert "Runs" not in header and "Average (All) CI low" not in header and len(rows) == 2
    # The board's Average is the mean of its four rounded columns, run_scores the same mean summed in another
    # order: one rule (score_mean) makes them the same number to the last digit, ties at the tenth decimal too.
    assert sorted(r["Average (All)"] for r in rows) == sorted(
        repr(v[1]) for k, v in per_run.items() if k[1:] == ("*", "overall"))
    assert all(len(r["Average (All)"].partition(".")[2]) <= 9 for r in rows)
    # Several tags ranked together, a family beside one of its members: a Tag column says whose each row is, each
    # row's numbers are its own tag's (the family's from multi_run_stats, the member's from run_scores).
    header, both = board(results, "--tag", "fam", "--tag", "fam-run2")
    assert header[:3] == ["model_name", "Tag", "Runs"] and len(both) == 4
    got = {(r["model_name"], r["Tag"]): r for r in both}
    for m in ("a", "b"):
        assert got[(m, "fam")]["Average (All)"] == repr(expected[(m, "*", "overall")][0])
        assert got[(m, "fam")]["Runs"] == "3" and got[(m, "fam-run2")]["Runs"] == "1"
        assert got[(m, "fam-run2")]["Average (All)"] == repr(per_run[(m, "*", "overall")][1])
        assert got[(m, "fam-run2")]["Average (All) CI low"] == ""  # one run: no interval
    averages = [float(r["Average (All)"]) for r in both]
    assert averages == sorted(averages, reverse=True)


def test_the_gpt4_columns_follow_a_gpt4_judge(server, tmp_path, data_dir, legacy):
    results = tmp_path / "r"
    assert run(server.base_url, results, data_dir, "--limit", "2", "--judge", "j", tag="t").returncode == 0
    header, _ = board(results, "--tag", "t")
    assert header == [*POOLED[:7], "Average (j)", *(f"{b} (j)" for b in sorted(BENCHMARKS.values())), *POOLED[7:]]
    assert run(server.base_url, results, data_dir, "--limit", "2", "--judge", "gpt-4-turbo-preview", "--stages",
               "judge", tag="t").returncode == 0
    header, rows = board(results, "--tag", "t")
    assert header[2] == "Average (ex-GPT4)" and header[-4] == "GPT4 delta" and "Average (GPT4)" in header
    (row,) = rows
    ex_gpt4 = statistics.mean([float(row["Average (All)"]), float(row["Average (j)"])])
    assert float(row["Average (ex-GPT4)"]) == pytest.approx(ex_gpt4, abs=1e-12)
    gpt4 = float(row["Average (GPT4)"])
    assert float(row["GPT4 delta"]) == pytest.approx((ex_gpt4 - gpt4) / gpt4, abs=1e-12)
    assert {"Average (ex-GPT4)", "GPT4 delta"} <= set(board(legacy)[0])


@pytest.mark.parametrize(("args", "message"), [
    (["--format", "xlsx"], "error: --format xlsx writes a workbook: name it with --out (e.g. --out board.xlsx)"),
    (["--judges", "nobody", "--out", "{out}/board.xlsx"], "error: --judges nobody: not a judge of tag 'legacy'; "
     "give pooled, all or judges among: gpt-4-turbo-preview (GPT4), gpt-4.1-2025-04-14 (GPT4.1), "
     "gpt-5.1-2025-11-13 (GPT5.1), llmjudge-tulu405 (Tulu405)"),
    (["--judges", "GPT4,nobody", "--format", "csv"], "error: --judges nobody: not a judge of tag 'legacy'; "),
    (["--format", "xml", "--out", "{out}/board.xlsx"], "error: --format 'xml' is not one of 'table', 'markdown', "
     "'csv', 'json', 'xlsx'"),
    (["--out", "{out}/board.txt"], "error: --out {out}/board.txt: name a .xlsx, .csv, .json or .md file, or say "
     "which with --format"),
    (["--format", "csv", "--out", "{out}/board.xlsx"], "error: --format csv and --out {out}/board.xlsx disagree"),
    (["--tag", "nothing", "--out", "{out}/board.xlsx"], "error: no runs tagged 'nothing' (nor nothing-run1 … N)"),
])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(legacy, tmp_path, args, message):
    out = tmp_path / "out"
    proc = shaberi("leaderboard", *(a.format(out=out) for a in args), "--results-dir", str(legacy))
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith(message.format(out=out)), proc.stderr
    assert not out.exists()


def test_one_number_prints_the_same_in_view_leaderboard_and_report(server, tmp_path, data_dir):
    """A family's mean is one number wherever it is shown. DuckDB sums in the order its plan gives, and the
    view and the leaderboard plan differently: unrounded, this family's Overall was 3.6749999999999994 in
    one and 3.6750000000000003 in the other, printed 3.67 and 3.68."""
    results = tmp_path / "r"
    assert run(server.base_url, results, data_dir, "--runs", "3", "--limit", "10", "--judge", "judge-a",
               "--judge", "gpt-4.1", "--passes", "lang_mixing,repetition,format_validation", tag="fam",
               model="cand").returncode == 0
    view = json.loads(shaberi("view", "--tag", "fam", "--judge", "*", "--format", "json", "--results-dir",
                              str(results)).stdout)
    means = {r["benchmark"]: r["mean"] for r in view["scores"][0]["rows"]}
    _, (row,) = board(results, "--tag", "fam")
    shown = {"Overall": "Average (All)", "ELYZA-tasks-100": "ELYZA 100 (All)", "MT-Bench": "JA-MT (All)",
             "Rakuda": "Rakuda (All)", "Tengu-Bench": "Tengu (All)"}
    assert {title: float(row[column]) for title, column in shown.items()} == {t: means[t] for t in shown}
    assert f"{means['Overall']:.2f}" in shaberi("leaderboard", "--tag", "fam", "--format", "markdown",
                                                "--results-dir", str(results)).stdout


def test_csv_cells_a_spreadsheet_would_run_as_formulas_are_written_inert(server, tmp_path):
    import csv
    import io

    from shaberi.cli.common import SafeCSV

    data = write_rakuda(tmp_path / "d", ["質問1"])
    for model in ("=2+3", "@SUM(A1)"):
        proc = shaberi("run", "--model", model, "--tag", "t", "--base-url", server.base_url, "--benchmark", "rakuda",
                       "--judge", "j", "--results-dir", str(tmp_path / "r"), "--data-dir", str(data))
        assert proc.returncode == 0, proc.stderr
    board = shaberi("leaderboard", "--tag", "t", "--format", "csv", "--results-dir", str(tmp_path / "r"))
    assert board.returncode == 0, board.stderr
    cells = {row[0] for row in csv.reader(io.StringIO(board.stdout))}
    assert {"'=2+3", "'@SUM(A1)"} <= cells and not {"=2+3", "@SUM(A1)"} & cells
    out = io.StringIO()
    SafeCSV(out).writerow(["-0.5", -0.5, "+cmd", "-1+2", "\tx", "plain", None])
    assert next(csv.reader(io.StringIO(out.getvalue()))) == ["-0.5", "-0.5", "'+cmd", "'-1+2", "'\tx", "plain", ""]
