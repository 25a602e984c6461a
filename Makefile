# The two commands: `make demo` (offline, no tokens) and `make test` (full suite).
.PHONY: demo test lint bench

demo:
	@scripts/bootstrap.sh
	.venv/bin/askhuman demo $(ARGS)

test:
	scripts/test.sh $(ARGS)

lint:
	@scripts/bootstrap.sh
	.venv/bin/ruff check .
	.venv/bin/mypy --strict bot/askhuman renderers storage
	.venv/bin/mypy bot

bench:
	@scripts/bootstrap.sh
	.venv/bin/python benchmarks/slack_ack.py --clicks 100
