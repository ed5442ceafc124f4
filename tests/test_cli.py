"""The command line as users meet it: bad input gives one line and exit 2 and writes nothing."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from shaberi.run_info import run_id_for
from shaberi.testing import LoopbackServer

from .conftest import shaberi, write_rakuda


def assert_clean_refusal(proc: subprocess.CompletedProcess[str], results, *needles: str) -> None:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    for needle in needles:
        assert needle in lines[0]
    assert not list(results.rglob("*.parquet")), "bad input must leave no rows behind"


def run_args(server, tmp_path, data_dir, *extra: str) -> list[str]:
    return ["run", "--model", "m", "--base-url", server.base_url, "--results-dir", str(tmp_path / "results"),
            "--data-dir", str(data_dir), *extra]


def test_unknown_benchmark(server, tmp_path, data_dir):
    proc = shaberi(*run_args(server, tmp_path, data_dir, "--benchmark", "elyza,jcommonsenseqa"))
    assert_clean_refusal(proc, tmp_path, "unknown benchmark jcommonsenseqa", "elyza, tengu, mt_bench, rakuda")


def test_missing_data_file(server, tmp_path):
    proc = shaberi(*run_args(server, tmp_path, tmp_path / "nowhere"))
    assert_clean_refusal(proc, tmp_path, "elyza_tasks_100", "shaberi data pull")


def test_empty_dataset(server, tmp_path):
    data = write_rakuda(tmp_path / "data", [])
    proc = shaberi(*run_args(server, tmp_path, data, "--benchmark", "rakuda"))
    assert_clean_refusal(proc, tmp_path, "holds no questions")


def test_unreachable_base_url(tmp_path, data_dir):
    proc = shaberi("run", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--results-dir",
                   str(tmp_path / "results"), "--data-dir", str(data_dir))
    assert_clean_refusal(proc, tmp_path, "cannot reach http://127.0.0.1:9/v1")


def test_missing_api_key_variable(server, tmp_path, data_dir):
    remote = shaberi("run", "--model", "gpt-4.1", "--base-url", "https://api.openai.com/v1", "--results-dir",
                     str(tmp_path / "results"), "--data-dir", str(data_dir))
    assert_clean_refusal(remote, tmp_path, "OPENAI_API_KEY is not set", "--api-key-env")
    named = shaberi(*run_args(server, tmp_path, data_dir, "--api-key-env", "SHABERI_TEST_NO_SUCH_KEY"))
    assert_clean_refusal(named, tmp_path, "SHABERI_TEST_NO_SUCH_KEY is not set")


@pytest.mark.parametrize(("model", "tag"), [("m", "../../etc"), ("m", "/tmp/x"), ("/abs/m", "t"),
                                           ("org/../../x", "t"), ("m", " "), ("m", "C:\\x")])
def test_names_that_would_escape_the_results_root(server, tmp_path, data_dir, model, tag):
    proc = shaberi("run", "--model", model, "--tag", tag, "--base-url", server.base_url,
                   "--results-dir", str(tmp_path / "results"), "--data-dir", str(data_dir))
    assert_clean_refusal(proc, tmp_path, "--model" if model != "m" else "--tag")


def test_unknown_stage_and_bad_limit(server, tmp_path, data_dir):
    assert_clean_refusal(shaberi(*run_args(server, tmp_path, data_dir, "--stages", "generate,judgee")), tmp_path,
                         "unknown stage judgee")
    assert_clean_refusal(shaberi(*run_args(server, tmp_path, data_dir, "--limit", "0")), tmp_path, "--limit")


def test_run_then_sql_in_three_formats(server, tmp_path, data_dir):
    proc = shaberi(*run_args(server, tmp_path, data_dir, "--benchmark", "rakuda,tengu", "--limit", "2"))
    assert proc.returncode == 0, proc.stderr
    assert "4 answers (0 reused, 4 called, 0 errors)" in proc.stdout

    results = str(tmp_path / "results")
    q = "SELECT benchmark, count(*) AS n FROM answers GROUP BY 1 ORDER BY 1"
    as_json = shaberi("sql", q, "--format", "json", "--results-dir", results)
    assert json.loads(as_json.stdout) == [{"benchmark": "rakuda", "n": 2}, {"benchmark": "tengu", "n": 2}]
    as_csv = shaberi("sql", q, "--format", "csv", "--results-dir", results)
    assert as_csv.stdout.splitlines() == ["benchmark,n", "rakuda,2", "tengu,2"]
    as_table = shaberi("sql", q, "--results-dir", results)
    assert "rakuda" in as_table.stdout and "tengu" in as_table.stdout
    as_markdown = shaberi("sql", q, "--format", "markdown", "--results-dir", results)
    assert as_markdown.stdout.splitlines() == ["| benchmark | n |", "|---|---|", "| rakuda | 2 |", "| tengu | 2 |", ""]

    everything = shaberi("sql", "SELECT * FROM answers", "--format", "json", "--results-dir", results)
    assert everything.returncode == 0, everything.stderr  # timestamps, lists and nulls all convert
    assert len(json.loads(everything.stdout)) == 4 and json.loads(everything.stdout)[0]["created_at"]
    env_dir = shaberi("sql", "SELECT count(*) AS n FROM runs", "--format", "csv", env={"SHABERI_RESULTS_DIR": results})
    assert env_dir.stdout.splitlines() == ["n", "1"]
    bad = shaberi("sql", "SELECT nope FROM answers", "--results-dir", results)
    assert bad.returncode == 2 and bad.stderr.startswith("error: SQL: Binder Error")
    assert len(bad.stderr.splitlines()) == 1


def test_run_evals_is_shaberi_run(server, tmp_path, data_dir):
    exe = subprocess.run([sys.executable, "-c", "import sys; from shaberi.cli import run_evals_main; "
                          "sys.argv[0] = 'run-evals'; run_evals_main()", *run_args(server, tmp_path, data_dir)[1:],
                          "--benchmark", "rakuda", "--limit", "1"], capture_output=True, text=True)
    assert exe.returncode == 0 and "1 answers" in exe.stdout, exe.stderr
    for script, entry in (("run-evals", "run_evals_main"), ("view-scores", "view_scores_main")):
        helped = subprocess.run([sys.executable, "-c", f"import sys; from shaberi.cli import {entry}; "
                                 f"sys.argv[0] = '{script}'; {entry}()", "--help"], capture_output=True, text=True)
        assert helped.stdout.startswith(f"Usage: {script} [OPTIONS]"), helped.stdout[:200]  # as typed, and it works
    bad = subprocess.run([sys.executable, "-c", "import sys; from shaberi.cli import run_evals_main; "
                          "sys.argv[0] = 'run-evals'; run_evals_main()", "--model", "m", "--benchmark", "nope",
                          "--base-url", server.base_url, "--results-dir", str(tmp_path / "bad")],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.startswith("error: unknown benchmark nope")


def test_a_second_process_on_the_same_run_exits_with_a_clear_message(server, tmp_path, data_dir):
    results = tmp_path / "results"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from shaberi.tables.store import Store\n"
         "with Store(sys.argv[1]).lock(sys.argv[2], 'x'):\n print('held', flush=True); time.sleep(60)",
         str(results), run_id_for("m", "default")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        proc = shaberi(*run_args(server, tmp_path, data_dir, "--benchmark", "rakuda"))
    finally:
        holder.kill()
        holder.wait()
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1
    assert "run 'm' tag 'default' is being written by another shaberi process" in lines[0]
    assert server.stats()["calls"] == 0


@pytest.mark.parametrize(("cap", "low", "high"), [(5, 5, 5), (100, 61, 100)])
def test_concurrency_bounds_requests_in_flight(tmp_path, data_dir, cap, low, high):
    with LoopbackServer(latency_ms=150) as slow:
        proc = shaberi("run", "--model", "m", "--base-url", slow.base_url, "--concurrency", str(cap),
                       "--results-dir", str(tmp_path), "--data-dir", str(data_dir),
                       *(["--benchmark", "elyza", "--limit", "30"] if cap < 10 else []))
        peak = slow.stats()["peak_in_flight"]
    assert proc.returncode == 0, proc.stderr
    assert low <= peak <= high


def test_demo_on_the_loopback_server_runs_every_stage_on_the_shipped_samples(tmp_path):
    proc = shaberi("demo", "--loopback", "--limit", "3", "--results-dir", str(tmp_path), env={"SHABERI_DATA_DIR": ""})
    assert proc.returncode == 0, proc.stderr
    assert "12 answers (0 reused, 12 called, 0 errors)" in proc.stdout and "judged 12" in proc.stdout
    assert "passes over 12 answers" in proc.stdout
    assert "Overall" in proc.stdout and (tmp_path / "shaberi-loopback" / "demo" / "manifest.json").is_file()
    # Again: the server comes up on another free port, and is the same model: every answer is reused.
    again = shaberi("demo", "--loopback", "--limit", "3", "--results-dir", str(tmp_path), env={"SHABERI_DATA_DIR": ""})
    assert again.returncode == 0 and "12 answers (12 reused, 0 called, 0 errors)" in again.stdout, again.stdout


@pytest.mark.parametrize(("option", "value"), [("--timeout", "0"), ("--max-tokens", "-1"), ("--judge-max-tokens", "0"),
                                               ("--temperature", "-3"), ("--rpm", "0"), ("--tpm", "-1"),
                                               ("--retry-errors", "-5"), ("--frequency-penalty", "99"),
                                               ("--temperature", "nan"), ("--frequency-penalty", "nan"),
                                               ("--rate-limit-timeout", "0"), ("--max-retries", "-1"),
                                               ("--retry-after-max", "nan"), ("--retry-after-max", "inf"),
                                               ("--concurrency-start", "0"),
                                               ("--concurrency", "1000000"), ("--judge-concurrency", "0"),
                                               ("--rpm", "inf"), ("--tpm", "inf"), ("--rate-limit-timeout", "inf"),
                                               ("--concurrency-start", "-12345678"),  # shown as given, not -1.2e+07
                                               ("--max-tokens", "18446744073709551616"),  # past int64: no traceback
                                               ("--judge-max-completion-tokens", "99999999999999999999"),
                                               ("--seed", "18446744073709551616"),
                                               ("--max-retries", "-99999999999999999999")])
def test_numbers_an_endpoint_would_refuse_or_that_turn_a_safeguard_off(server, tmp_path, data_dir, option, value):
    proc = shaberi("run", "--model", "m", "--base-url", server.base_url, option, value,
                   "--results-dir", str(tmp_path / "results"), "--data-dir", str(data_dir))
    assert_clean_refusal(proc, tmp_path, f"{option} {value} is out of range")
    assert server.stats()["calls"] == 0


def test_a_judge_name_given_twice_on_two_endpoints_is_refused(server, tmp_path, data_dir):
    proc = shaberi("run", "--model", "m", "--base-url", server.base_url, "--judge", f"j@{server.base_url}",
                   "--judge", "j@http://127.0.0.1:9/v1", "--results-dir", str(tmp_path / "results"),
                   "--data-dir", str(data_dir))
    assert_clean_refusal(proc, tmp_path, "--judge 'j' is given twice")


def test_stored_text_prints_as_stored_never_as_markup(tmp_path):
    """A judge reply or model name holding "[/x]" or "[[fail:401]]" is text, not console markup."""
    (tmp_path / "r" / "tables").mkdir(parents=True)  # a results root, empty
    proc = shaberi("sql", "SELECT '[/]' AS t, '評価不能 [[fail:401]]' AS u, 'llama[q4]' AS m", "--results-dir",
                   str(tmp_path / "r"))
    assert proc.returncode == 0, proc.stderr
    assert "[/]" in proc.stdout and "評価不能 [[fail:401]]" in proc.stdout and "llama[q4]" in proc.stdout


def test_help_bare_commands_and_options_that_would_do_nothing(tmp_path):
    bare = shaberi()
    assert bare.returncode == 0 and bare.stdout.startswith("Usage:") and "run" in bare.stdout and not bare.stderr
    assert shaberi("view", "-h").stdout.startswith("Usage: python -m shaberi view [OPTIONS]")
    ignored = shaberi("run", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--pass-option", "x.y=1",
                      "--results-dir", str(tmp_path / "r"))
    assert ignored.returncode == 2 and ignored.stderr == ("error: --pass-option 'x.y=1' needs --passes naming its "
                                                          "pass, e.g. --passes lang_mixing\n")
    assert not (tmp_path / "r").exists()
    runs = shaberi("view", "--runs", "0", "--results-dir", str(tmp_path))
    assert runs.returncode == 2 and runs.stderr == "error: --runs 0 must be at least 1\n"


def test_markdown_cells_keep_pipes_and_line_breaks_inside_the_table(tmp_path):
    (tmp_path / "tables").mkdir()
    out = shaberi("sql", "SELECT 'a|b' AS x, 'l1' || chr(10) || 'l2' AS y", "--format", "markdown", "--results-dir",
                  str(tmp_path))
    assert out.stdout.splitlines() == ["| x | y |", "|---|---|", "| a\\|b | l1<br>l2 |", ""]


def test_sql_reads_the_results_and_nothing_else(tmp_path):
    root = str(tmp_path / "r")
    (tmp_path / "r" / "tables").mkdir(parents=True)
    for query, needle in [(f"COPY (SELECT 1) TO '{tmp_path}/out.csv'", "not COPY"),
                          (f"SELECT 1; ATTACH '{tmp_path}/x.db'", "not ATTACH"),
                          ("SET enable_external_access = true", "not SET"),
                          ("SELECT * FROM read_text('/etc/hostname')", "Permission Error")]:
        proc = shaberi("sql", query, "--results-dir", root)
        assert proc.returncode == 2 and needle in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert not (tmp_path / "out.csv").exists() and not (tmp_path / "x.db").exists()
    assert shaberi("sql", "EXPLAIN SELECT count(*) FROM answers", "--results-dir", root).returncode == 0


@pytest.mark.parametrize(("judge", "said"), [("*", "'*' names the judges pooled"),
                                             ("* [original:abc1234]", "'*' names the judges pooled"),
                                             ("j [original:abc1234]", "give the model's name and the prompt set")])
def test_a_judge_cannot_take_the_pooled_judges_name_nor_a_prompt_sets_label(tmp_path, judge, said):
    proc = shaberi("run", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--judge",
                   f"{judge}@http://127.0.0.1:9/v1", "--results-dir", str(tmp_path / "r"))
    assert proc.returncode == 2 and said in proc.stderr and proc.stderr.count("\n") == 1 and not (
        tmp_path / "r").exists()


@pytest.mark.parametrize("args, named", [
    (["view", "--tag", "a", "--tag", "b"], "--tag"),
    (["compare", "a", "b", "--judge", "j1", "--judge", "j2"], "--judge"),
    (["report", "--tag", "a", "--out", "x.html", "--out", "y.html"], "--out"),
    (["run", "--model", "m1", "--model", "m2", "--base-url", "http://127.0.0.1:9/v1", "--judge", "a", "--judge", "b"],
     "--model"),
    (["ensemble", "check", "--strategy", "majority", "--results-dir", "elsewhere"], "--results-dir"),
])
def test_a_single_valued_option_given_twice_is_bad_input(tmp_path, args, named):
    """The parser would keep the last value silently (--tag a --tag b read as b): refused, nothing written. An
    option that takes several (run --judge, leaderboard --tag) may repeat."""
    proc = shaberi(*args, "--results-dir", str(tmp_path / "r"))
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line.startswith(f"error: {named} given more than once, but it takes one value (the last would win "
                           "silently): give it once") and not (tmp_path / "r").exists()
    board = shaberi("leaderboard", "--tag", "a", "--tag", "b", "--results-dir", str(tmp_path / "r"))
    assert board.returncode == 2 and "no results root at" in board.stderr  # read as two tags, not refused
    (tmp_path / "r" / "tables").mkdir(parents=True)
    board = shaberi("leaderboard", "--tag", "a", "--tag", "b", "--results-dir", str(tmp_path / "r"))
    assert board.returncode == 2 and "no runs tagged 'a'" in board.stderr


@pytest.mark.parametrize(("option", "url", "said"), [
    ("--base-url", "htp://alice:Pa55SECRETword@127.0.0.1:9/v1", "not an http(s) URL"),
    ("--base-url", "http://alice:Pa55SECRETword@/v1", "not an http(s) URL"),
    ("--base-url", "alice:Pa55SECRETword@127.0.0.1:9/v1", "not an http(s) URL"),
    ("--base-url", "http://alice:Pa55SECRETword@[::1/v1", "not a valid URL"),
    ("--base-url", "http://alice:Pa 55SECRETword@127.0.0.1:9/v1", "holds a space"),
    ("--base-url", "http://127.0.0.1:9/v1?api-key=Pa55SECRETword", "takes no query"),
    ("--judge", "j@http://bob:Pa55SECRETword@127.0.0.1:1/v1", "cannot reach http://127.0.0.1:1/v1"),
    ("--judge", "j@htp://bob:Pa55SECRETword@127.0.0.1:1/v1", "not an http(s) URL"),
])
def test_a_url_refused_is_said_without_its_password(server, tmp_path, data_dir, option, url, said):
    args = run_args(server, tmp_path, data_dir, "--benchmark", "rakuda", "--limit", "1")
    if option == "--base-url":
        args[args.index("--base-url") + 1] = url
    else:
        args += [option, url]
    proc = shaberi(*args)
    assert_clean_refusal(proc, tmp_path, said)
    assert "SECRET" not in proc.stderr + proc.stdout and not (tmp_path / "results").exists()


def test_a_key_holding_a_line_break_is_refused_before_any_call(server, tmp_path, data_dir):
    proc = shaberi(*run_args(server, tmp_path, data_dir, "--api-key-env", "MY_KEY"), env={"MY_KEY": "sk-a\nsk-b"})
    assert_clean_refusal(proc, tmp_path, "the key in MY_KEY holds a control character")
    assert "sk-a" not in proc.stderr and server.stats()["calls"] == 0


def test_a_password_holding_an_at_sign_is_stripped_whole_from_what_a_run_stores(server, tmp_path):
    from shaberi.redact import strip_credentials

    assert strip_credentials("see http://alice:Pa@55SECRET@h:1/v1 and https://h/v1 me@x") == (
        "see http://h:1/v1 and https://h/v1 me@x")
    data = write_rakuda(tmp_path / "d", ["質問"])
    url = server.base_url.replace("http://", "http://alice:Pa@55SECRET@")
    proc = shaberi("run", "--model", "m", "--base-url", url, "--judge", "j", "--benchmark", "rakuda",
                   "--results-dir", str(tmp_path / "r"), "--data-dir", str(data))
    assert proc.returncode == 0, proc.stderr
    written = b"".join(p.read_bytes() for p in (tmp_path / "r").rglob("*") if p.is_file())
    assert b"55SECRET" not in written and "55SECRET" not in proc.stdout + proc.stderr


def test_version_prints_the_installed_version():
    from importlib.metadata import version

    done = shaberi("--version")
    assert done.returncode == 0 and done.stdout == f"shaberi {version('shaberi')}\n" and not done.stderr


def _headings(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.endswith(":") and not line.startswith(" ")]


def test_help_in_sections_in_the_order_of_the_work():
    """``shaberi --help`` groups the commands by section, run first; ``run --help`` groups its options in panels,
    and a ``[default: …]`` in a help text is printed as written."""
    top = shaberi("--help")
    assert top.returncode == 0, top.stderr
    assert _headings(top.stdout)[1:] == ["Evaluate:", "Results:", "Ensemble:", "Many models:", "Local model:",
                                         "Data:"]
    listed = [line.split()[0] for line in top.stdout.split("\nEvaluate:\n")[1].splitlines() if line.startswith("  ")]
    assert listed[:9] == ["run", "list", "view", "compare", "report", "inspect", "leaderboard", "sql", "export"]
    from typer.main import get_command

    from shaberi.cli import app

    assert sorted(listed) == sorted(get_command(app).commands)  # type: ignore[attr-defined]  # each exactly once
    run = shaberi("run", "--help").stdout
    assert _headings(run) == ["Options:", "Model and generation:", "Judges:", "Passes:", "Runs and families:",
                              "Rate limits:", "Data and results:"]
    assert "[default: OPENAI_API_KEY, optional on loopback]" in " ".join(run.split())
    panel = run.split("\nJudges:\n")[1].split("\n\n")[0]
    assert "--judge-prompts" in panel and "--model " not in panel and "--rpm" not in panel


@pytest.mark.parametrize("command", [["view", "--tag", "v1"], ["compare", "v1", "v2"],
                                     ["report", "--tag", "v1", "--out", "r.html"], ["inspect", "--tag", "v1"],
                                     ["leaderboard"], ["export", "--tag", "v1"]])
def test_a_reader_run_from_another_directory_says_no_results_root_is_there(tmp_path, command):
    proc = shaberi(*command, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr == (f"error: no results root at {tmp_path.resolve() / 'results'} (no "
                                                    "tables/ there): give --results-dir DIR (or set "
                                                    "SHABERI_RESULTS_DIR) where shaberi run wrote its results\n")
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(("args", "said"), [
    (["sql", "   "], "shaberi sql got no query"),
    (["sql", "SELECT 1", "--results-dir", "{tmp}/nowhere"], "no results root at"),
    (["ensemble", "quick-eval", "--model", "m", "--out", "{tmp}"], "is a directory"),
    (["ensemble", "check", "--model", "m", "--out", "{tmp}"], "is a directory"),
    (["serve-local", "--port", "99999"], "not in the range 1<=x<=65535"),
])
def test_input_a_command_cannot_use_is_one_line_before_any_work(tmp_path, args, said):
    """An empty query, a results folder that is not there (not an empty one), a result file that is a folder, a
    port no socket has: one line, exit 2, nothing written."""
    (tmp_path / "r" / "tables").mkdir(parents=True)
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    proc = shaberi(*args, *([] if "--results-dir" in args or args[0] == "serve-local" else
                            ["--results-dir", str(tmp_path / "r")]))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and said in proc.stderr, proc.stderr
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["r", "tables"]
