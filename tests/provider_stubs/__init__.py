"""HTTP stand-ins for real providers: test infrastructure, not part of the wheel.

Each stub is a local server (or, for Bedrock, a client object) that checks a request as its
provider does (HTTP 400 for what the provider refuses, its window, its prompt-cache
accounting) and answers from a script, so a LangChain chat model (`ChatOpenAI`,
`ChatAnthropic`, `ChatBedrockConverse`) can drive an agent offline:

- `openai_stub.OpenAIStub`: OpenAI's chat completions;
- `anthropic_stub.AnthropicStub`: Anthropic's messages API and its cache breakpoints;
- `converse_stub.bedrock_model`: Bedrock's Converse API on an `AnthropicStub`.

The tests import them as `provider_stubs` (pyproject's pytest `pythonpath` puts `tests/` on
`sys.path`); the benches through `bench/_stub_path.py`. The public test double is
`langchain_contextkit.testing.ScriptedChatModel`.
"""
