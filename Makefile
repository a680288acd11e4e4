# Thin aliases for ./lab, the lab's entry point (which also works where make is absent).
PRESET ?= quick

.PHONY: setup test lab lint bench clean

setup:
	./lab setup

test:
	./lab test

lab:
	./lab run --preset $(PRESET)

lint:
	./lab lint

bench:
	./lab bench fastapi

clean:
	rm -rf artifacts models results test-artifacts
