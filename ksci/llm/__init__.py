"""The LLM kernel scientist's stages: selector, experiment designer, kernel writer and findings, over any
OpenAI-compatible endpoint (the openai SDK). Plain Python, no Prefect; the scientist's loop is
ksci/proposers/scientist.py, and tasks/llm.py makes the call a Prefect task."""
