"""Installs pt2kit's autoload hook, ``pt2kit-autoload.pth``, at the root of site-packages.

setuptools has no declarative way to put a file there. ``build_py`` copies it in
for wheels (``pip install .``); an editable install (``pip install -e .``) builds
its wheel through ``editable_wheel`` instead, so that command writes it too.
Everything else lives in pyproject.toml.
"""
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.editable_wheel import editable_wheel

PTH = "pt2kit-autoload.pth"
PTH_SOURCE = Path(__file__).parent / "pt2kit" / PTH


class build_py_with_pth(build_py):
    def run(self) -> None:
        super().run()
        self.copy_file(str(PTH_SOURCE), str(Path(self.build_lib) / PTH))

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        return [*super().get_outputs(include_bytecode), str(Path(self.build_lib) / PTH)]


class _StrategyWithPth:
    """Wraps an editable-install strategy so the wheel it writes also holds the hook."""

    def __init__(self, strategy) -> None:
        self._strategy = strategy

    def __call__(self, wheel, files, mapping) -> None:
        self._strategy(wheel, files, mapping)
        wheel.writestr(PTH, PTH_SOURCE.read_text())

    def __enter__(self):
        self._strategy.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._strategy.__exit__(*exc)


class editable_wheel_with_pth(editable_wheel):
    def _select_strategy(self, *args, **kwargs):
        return _StrategyWithPth(super()._select_strategy(*args, **kwargs))


setup(cmdclass={"build_py": build_py_with_pth, "editable_wheel": editable_wheel_with_pth})
