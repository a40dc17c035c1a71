"""A small tool-calling agent on the official `openai` SDK, for toolscope's loop end-to-end test.

Usage: python loop_agent.py BASE_URL MODE

BASE_URL `env` takes no configuration at all: the SDK reads `OPENAI_BASE_URL` and
`OPENAI_API_KEY` itself, as an agent run by `toolscope run` does.

MODE:
  loop       a travel agent: the model calls get_weather and get_time in one reply (parallel
             calls), then `task` (which runs a sub-agent: a second conversation with its own
             system prompt), then `book`, then answers: a 4-turn tool loop (call -> execute ->
             result -> next call).
  timestamp  the same loop, with the current time (microseconds) in the system prompt, rewritten
             every turn.
  stuck      every tool answers "error: timeout" and the model, shown retrying in the few-shot
             history, calls the same tool again: a stuck loop (stopped after 4 turns). The agent
             also answers one call under a wrong id: an unanswered call and a result for an id
             no call had.

The model follows the few-shot history (SmolLM2-135M at temperature 0 copies its pattern). Each
request prints one JSON line: {"mode", "conversation", "turn", "calls": [[name, arguments]],
"content", "timings", "usage"} with what the SDK parsed (the response's extra `timings` field
kept by the SDK's models).
"""

import datetime
import json
import sys

import openai

BASE, MODE = sys.argv[1], sys.argv[2]
if BASE == "env":
    # base URL and key from the environment (OPENAI_BASE_URL, OPENAI_API_KEY), as any SDK user
    client = openai.OpenAI(max_retries=0)
else:
    client = openai.OpenAI(base_url=BASE.rstrip("/") + "/v1", api_key="sk-none", max_retries=0)


def fn(name, desc, **props):
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": desc,
            "parameters": {
                "type": "object",
                "properties": {k: {"type": "string", "description": v} for k, v in props.items()},
                "required": list(props),
            },
        },
    }


TOOLS = [
    fn("get_weather", "Get the current weather for a city", city="City name"),
    fn("get_time", "Get the current local time for a city", city="City name"),
    fn("task", "Ask a helper agent to summarise notes", prompt="What to summarise"),
    fn("book", "Book the trip to a city", city="City name"),
]

SYSTEM = "You are a travel agent. Call the tools in order: weather and time, then task, then book."

FACTS = {
    "Paris": ("18 C", "10:00"),
    "Berlin": ("12 C", "11:00"),
    "Rome": ("24 C", "12:00"),
    "Lisbon": ("21 C", "09:00"),
}


def call(i, name, args):
    return {
        "id": f"call_{i:02d}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args, separators=(",", ":"))},
    }


def fewshot_trip(city, k):
    w, t = FACTS[city]
    n = k * 10
    note = f"{city}: {w} at {t}"
    return [
        {"role": "user", "content": f"Plan a trip to {city}."},
        {"role": "assistant", "content": None, "tool_calls": [
            call(n, "get_weather", {"city": city}), call(n + 1, "get_time", {"city": city})]},
        {"role": "tool", "tool_call_id": f"call_{n:02d}", "content": w},
        {"role": "tool", "tool_call_id": f"call_{n + 1:02d}", "content": t},
        {"role": "assistant", "content": None, "tool_calls": [call(n + 2, "task", {"prompt": note})]},
        {"role": "tool", "tool_call_id": f"call_{n + 2:02d}", "content": f"Nice day in {city}."},
        {"role": "assistant", "content": None, "tool_calls": [call(n + 3, "book", {"city": city})]},
        {"role": "tool", "tool_call_id": f"call_{n + 3:02d}", "content": "booked"},
        {"role": "assistant", "content": f"Your trip to {city} is booked."},
    ]


def fewshot_stuck(city, k):
    n = k * 10
    out = [{"role": "user", "content": f"What is the weather in {city}?"}]
    for j in range(3):
        out.append({"role": "assistant", "content": None,
                    "tool_calls": [call(n + j, "get_weather", {"city": city})]})
        out.append({"role": "tool", "tool_call_id": f"call_{n + j:02d}", "content": "error: timeout"})
    out.append({"role": "assistant", "content": "The weather service is down."})
    return out


def run_tool(name, args):
    city = args.get("city", "Lisbon")
    w, t = FACTS.get(city, ("20 C", "08:00"))
    if MODE == "stuck":
        return "error: timeout"
    if name == "get_weather":
        return w
    if name == "get_time":
        return t
    if name == "task":
        # the helper's own words vary; the agent reports its summary in the few-shot's form
        subagent(args.get("prompt", ""))
        city = args.get("prompt", "Lisbon").split(":")[0].strip() or "Lisbon"
        return f"Nice day in {city}."
    if name == "book":
        return "booked"
    return "unknown tool"


def emit(conversation, turn, resp):
    m = resp.choices[0].message
    extra = resp.model_extra or {}
    print(json.dumps({
        "mode": MODE,
        "conversation": conversation,
        "turn": turn,
        "calls": [[c.function.name, c.function.arguments] for c in (m.tool_calls or [])],
        "content": m.content,
        "timings": extra.get("timings"),
        "usage": resp.usage.model_dump() if resp.usage else None,
    }), flush=True)


def subagent(prompt):
    """A second conversation: its own system prompt, one request."""
    messages = [
        {"role": "system", "content": "You summarise travel notes in one short sentence."},
        {"role": "user", "content": prompt},
    ]
    r = client.chat.completions.create(
        model="smollm2", messages=messages, max_tokens=24, temperature=0, seed=42)
    emit("subagent", 1, r)
    return r.choices[0].message.content or ""


def system_prompt():
    if MODE == "timestamp":
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%H:%M:%S.%f")
        return f"{SYSTEM} Current time: {now}."
    return SYSTEM


def main():
    if MODE == "stuck":
        history = fewshot_stuck("Paris", 1) + fewshot_stuck("Berlin", 2)
        user = {"role": "user", "content": "What is the weather in Lisbon?"}
    else:
        history = fewshot_trip("Paris", 1) + fewshot_trip("Berlin", 2) + fewshot_trip("Rome", 3)
        user = {"role": "user", "content": "Plan a trip to Lisbon."}
    messages = [{"role": "system", "content": system_prompt()}] + history + [user]
    for turn in range(1, 6):
        messages[0] = {"role": "system", "content": system_prompt()}
        r = client.chat.completions.create(
            model="smollm2", messages=messages, tools=TOOLS, tool_choice="auto",
            max_tokens=96, temperature=0, seed=42)
        emit("main", turn, r)
        m = r.choices[0].message
        sent = {"role": "assistant", "content": m.content}
        if m.tool_calls:
            sent["tool_calls"] = [
                {"id": c.id, "type": "function",
                 "function": {"name": c.function.name, "arguments": c.function.arguments}}
                for c in m.tool_calls
            ]
        messages.append(sent)
        if not m.tool_calls or (MODE == "stuck" and turn == 4):
            break
        for c in m.tool_calls:
            result = run_tool(c.function.name, json.loads(c.function.arguments or "{}"))
            cid = c.id
            if MODE == "stuck" and turn == 2:
                cid = "call_wrong"  # answered under an id no call had
            messages.append({"role": "tool", "tool_call_id": cid, "content": result})


main()
