"""A worker process serving one conversation through a framework adapter on a store:
``python adapter_workers.py FRAMEWORK PRESET STORE_URL SERVER_URL FIRST LAST``. It reloads the
conversation from the store (a stateless worker has nothing else), asks questions FIRST
to LAST-1 through the framework's agent (each gets a read_file call, then an answer), and
prints what its session saw as JSON."""

from __future__ import annotations

import json
import sys
from typing import Any

from framework_agents import read_file_output

SYSTEM = "You are a careful coding agent."
CONVERSATION = "conv-1"
PRESET = (
    'strict = true\n[[handlers]]\nuse = "inactivity-memorize"\n'
    '[[handlers]]\nuse = "update-threshold"\nminimumMessageTokensToInit = 300\n'
    "minimumTokensBetweenUpdate = 200\ntoolCallsBetweenUpdates = 1\n"
)


def read_file(path: str) -> str:
    """Read a file of the project."""
    return read_file_output(path)


def langchain_turns(preset: str, store: str, server: str, questions: list[str]) -> Any:
    from langchain.agents import create_agent
    from langchain_anthropic import ChatAnthropic
    from langchain_core.tools import tool

    from stenograph.integrations.langchain import StenographMiddleware, from_anthropic

    middleware = StenographMiddleware(preset, store=store)
    model = ChatAnthropic(
        model="claude-sonnet-4-6", base_url=server, api_key="test-key", max_retries=0
    )
    agent = create_agent(model, [tool(read_file)], system_prompt=SYSTEM, middleware=[middleware])
    session = middleware.session(CONVERSATION)
    messages: list[Any] = from_anthropic(session.conversation())
    config: Any = {"configurable": {"thread_id": CONVERSATION}}
    for question in questions:
        state = agent.invoke(
            {"messages": [*messages, {"role": "user", "content": question}]}, config
        )
        messages = state["messages"]
    return middleware, session


def pydantic_ai_turns(preset: str, store: str, server: str, questions: list[str]) -> Any:
    from pydantic_ai import Agent
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider

    from stenograph.integrations.pydantic_ai import Stenograph, from_anthropic

    capability = Stenograph(preset, store=store)
    provider = AnthropicProvider(api_key="test-key", base_url=server)
    agent = Agent(
        AnthropicModel("claude-sonnet-4-6", provider=provider),
        instructions=SYSTEM,
        tools=[read_file],
        capabilities=[capability],
    )
    session = capability.session(CONVERSATION)
    history: list[Any] = from_anthropic(session.conversation())
    for question in questions:
        result = agent.run_sync(question, message_history=history, conversation_id=CONVERSATION)
        history = result.all_messages()
    return capability, session


def main() -> None:
    framework, preset, store, server, first, last = sys.argv[1:7]
    questions = [f"Question {i}: what does file {i} do?" for i in range(int(first), int(last))]
    run = langchain_turns if framework == "langchain" else pydantic_ai_turns
    adapter, session = run(preset, store, server, questions)
    report = {
        "entries": [e.uuid for e in session.history],
        "kinds": [e.kind for e in session.events],
    }
    adapter.close()
    print(json.dumps(report))


if __name__ == "__main__":
    main()
