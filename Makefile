# The habits CI checks (.ci/run), one target each. Run from the repository root, in the venv.
.PHONY: test lint docs serve

test:
	python -m pytest

lint:
	ruff check .
	ruff format --check .
	mypy
	lint-imports

docs:
	mkdocs build --strict

serve:
	mkdocs serve
