"""The LLM kernel scientist: selector, experiment designer, kernel writer and findings, over any OpenAI-compatible
endpoint (the openai SDK). Plain Python, no Prefect; tasks/llm.py and flows/llm_generation.py orchestrate it."""
