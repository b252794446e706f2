"""``python -m ipuexp.validate --plot PATH`` says where it wrote the plot."""
from __future__ import annotations

from types import SimpleNamespace

from ipuexp.commands import validate as validate_command


def test_plot_says_where(monkeypatch, tmp_path, capsys):
    drawn = []
    monkeypatch.setattr(validate_command, "run",
                        lambda cfg, refit=False, complete=False: SimpleNamespace(outcomes=[]))
    monkeypatch.setattr(validate_command, "print_report", lambda report, cfg: None)
    monkeypatch.setattr(validate_command, "plot", lambda report, path: drawn.append(path))
    target = tmp_path / "validation.png"
    assert validate_command.main(["--no-loo", "--plot", str(target)]) == 0
    assert drawn == [target]
    assert f"Wrote the predicted-vs-published plot to {target}" in capsys.readouterr().out
