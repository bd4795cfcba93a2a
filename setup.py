"""The wheel's packages, found rather than listed (the rest of the build is pyproject.toml's).

Every package under ``openhands_memory/`` ships as found. The migrations live at the top of
the repository, where alembic.ini points, and ship inside the wheel as
``openhands_memory.migrations`` (pyproject.toml's ``package-dir``), so an installed command can
upgrade files too; a package outside its parent's folder is one ``packages.find`` in
pyproject.toml cannot find, hence this file.
"""

from setuptools import find_packages, setup

setup(packages=[*find_packages(include=["openhands_memory", "openhands_memory.*"]),
                "openhands_memory.migrations", "openhands_memory.migrations.versions"])
