# The two commands: `make demo` (offline, no tokens) and `make test` (full suite).
.PHONY: demo test test-integrations lint bench

demo:
	@scripts/bootstrap.sh
	.venv/bin/askhuman demo $(ARGS)

test:  # everything: the server's suite, then the framework integrations in their own venv
	scripts/test.sh $(ARGS)
	@$(MAKE) --no-print-directory test-integrations ARGS="$(ARGS)"

# The framework integrations (LangGraph, OpenAI Agents SDK, ADK, pydantic-ai, A2A) with
# the real packages, in their own venv; each test talks to a served askhuman from .venv.
test-integrations:
	@scripts/bootstrap.sh
	@scripts/bootstrap-integrations.sh
	cd clients/python && ../../.venv-integrations/bin/pytest $(ARGS)

lint:
	@scripts/bootstrap.sh
	.venv/bin/ruff check .
	.venv/bin/mypy --strict bot/askhuman renderers storage
	.venv/bin/mypy bot

bench:  # ~20 minutes on 2 cores; set ASKHUMAN_TEST_POSTGRES_URL to add the PostgreSQL rows
	@scripts/bootstrap.sh
	.venv/bin/python benchmarks/render.py --repeat 300
	.venv/bin/python benchmarks/expiry.py --requests 10000 --rounds 3
	.venv/bin/python benchmarks/expiry.py --served --requests 10000 --rounds 3
	.venv/bin/python benchmarks/throughput.py --runs 200
	.venv/bin/python benchmarks/resume_cost.py --runs 200 --concurrency 16
	.venv/bin/python benchmarks/serve_throughput.py --runs 200 --workers 1,2,split --repeat 2
	.venv/bin/python benchmarks/serve_throughput.py --runs 100 --in-flight 100 --workers 1,2,split
	.venv/bin/python benchmarks/http_stack.py --requests 3000 --rounds 3
	.venv/bin/python benchmarks/serve_throughput.py --idle 40
	.venv/bin/python benchmarks/serve_throughput.py --idle 30 --split
	.venv/bin/python benchmarks/slack_ack.py --clicks 100 --rounds 4
	.venv/bin/python benchmarks/feishu_ack.py --clicks 100 --rounds 4
	.venv/bin/python benchmarks/idle_rss.py --repeat 3
	.venv/bin/python benchmarks/idle_rss.py --only-workers --workers 2 4 --repeat 1 --setups none slack feishu
	.venv/bin/python benchmarks/batch.py --rounds 10
	.venv/bin/python benchmarks/tool_approval.py --runs 50 --concurrency 10
	.venv/bin/python benchmarks/grant_api.py --concurrency 200 --sequential 100 --rounds 3
	.venv/bin/python benchmarks/grant_latency.py --concurrency 200 --rounds 3
	.venv/bin/python benchmarks/api_latency.py --requests 40
	.venv/bin/python benchmarks/tracing_cost.py --lives 20000
	.venv/bin/python benchmarks/metrics_cost.py --rounds 5 --workers 2,32
	.venv/bin/python benchmarks/write_lock.py --clicks 30
