"""`logstream run --config FILE`: the file's [run] table is read; flags win over it."""

from __future__ import annotations

from logstream.cli import main


def write(tmp_path, body: str):
    path = tmp_path / "logstream.toml"
    path.write_text("[run]\n" + body)
    return path


def test_values_come_from_the_file(tmp_path, capsys):
    cfg = write(tmp_path, f'input_dir = "{tmp_path}"\nformat = "common"\ntop = 0\n')
    assert main(["run", "--config", str(cfg), "--no-dashboard"]) == 2
    assert "top" in capsys.readouterr().err  # top = 0 from the file was validated


def test_flags_win_over_the_file(tmp_path, capsys):
    cfg = write(
        tmp_path,
        'input_dir = "/nonexistent/landing"\nformat = "common"\nwatermark = "soon"\ntop = 0\n'
        f'output_dir = "{tmp_path / "out"}"\nstate_dir = "{tmp_path / "state"}"\n'
        f'store = "sqlite:///{tmp_path / "s.db"}"\n',
    )
    code = main(
        [
            "run",
            "--config",
            str(cfg),
            "--watermark",
            "5 minutes",
            "--top",
            "3",
            "--no-dashboard",
            "--quiet",
        ]
    )
    err = capsys.readouterr().err
    # the file's bad watermark and top were replaced by the flags, so the configuration was
    # valid and the run got as far as opening its source
    assert code == 2 and "input directory '/nonexistent/landing' does not exist" in err
    assert "soon" not in err


def test_unknown_keys_and_bad_files_are_named(tmp_path, capsys):
    assert main(["run", "--config", str(write(tmp_path, 'colour = "blue"\n'))]) == 2
    assert "unknown option 'colour'" in capsys.readouterr().err
    bad = tmp_path / "bad.toml"
    bad.write_text("run = [")
    assert main(["run", "--config", str(bad)]) == 2
    assert "not valid TOML" in capsys.readouterr().err
    assert main(["run", "--config", str(tmp_path / "missing.toml")]) == 2
    assert "does not exist" in capsys.readouterr().err
