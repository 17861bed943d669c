"""An agent loop on the embedded default model: it calls real Python functions, then answers.

Run it with ``.venv/bin/python examples/agent.py`` (after ``make setup``). Two tools:

- ``calculate``: evaluates an arithmetic expression (``+ - * / ** %``, parentheses, numbers);
  its schema's ``pattern`` lets the model write nothing else;
- ``product_price``: looks a product up in the bundled ``examples/data/shop.sqlite`` (read-only);
  its schema's ``enum`` is the shop's product names, read from the database.

Each question asks the model for one call (``tool_choice="required"``: a 135M model is
unreliable at deciding by itself), runs it, hands the result back as a ``tool`` message, and
asks for the answer in text (``tool_choice="none"``; without the loop's nudge "Now answer my
question" this small model tends to repeat its call as text). structgen guarantees every call names a
real tool and has arguments that validate; whether the model picked the *right* call is up to
the model.
"""

from __future__ import annotations

import ast
import json
import operator
from pathlib import Path

import torch

import structgen
from structgen.frontends.sql import ReadOnly

SHOP = Path(__file__).resolve().parent / "data" / "shop.sqlite"



def product_names() -> list[str]:
    with ReadOnly(SHOP) as con:
        return [name for (name,) in con.execute("SELECT name FROM products ORDER BY name")]


TOOLS = [
    {"type": "function", "function": {
        "name": "calculate",
        "description": "Evaluate an arithmetic expression.",
        "parameters": {"type": "object", "properties": {
            "expression": {"type": "string", "description": "Numbers, + - * / ** % and parentheses.",
                           "pattern": r"^[0-9(][0-9+\-*/%(). ]*$"}},
            "required": ["expression"]}}},
    {"type": "function", "function": {
        "name": "product_price",
        "description": "The price of a product sold in the shop.",
        "parameters": {"type": "object", "properties": {
            "name": {"type": "string", "description": "The product's name.", "enum": product_names()}},
            "required": ["name"]}}},
]

QUESTIONS = [
    "What is 17 times 23?",
    "Look up the price of Green tea.",
    "Find the product price of Fountain pen.",
]

_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
              ast.Pow: operator.pow, ast.Mod: operator.mod, ast.USub: operator.neg, ast.UAdd: operator.pos}


def calculate(expression: str) -> float:
    """Arithmetic only: the expression is parsed, never passed to ``eval``."""

    def value(node: ast.AST) -> float:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            return _OPERATORS[type(node.op)](value(node.left), value(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
            return _OPERATORS[type(node.op)](value(node.operand))
        raise ValueError(f"not arithmetic: {ast.unparse(node)}")

    return value(ast.parse(expression, mode="eval").body)


def product_price(name: str) -> dict:
    with ReadOnly(SHOP) as con:
        row = con.execute("SELECT name, price FROM products WHERE name = ?", (name,)).fetchone()
    return {"product": row[0], "price": row[1]} if row else {"error": f"no product named {name!r}"}


FUNCTIONS = {"calculate": calculate, "product_price": product_price}


def run_call(call: dict) -> str:
    """Execute one tool call; an exception becomes the result text, as an agent would report it."""
    fn = call["function"]
    try:
        return json.dumps(FUNCTIONS[fn["name"]](**json.loads(fn["arguments"])))
    except (ValueError, ZeroDivisionError, OverflowError, SyntaxError) as err:
        return json.dumps({"error": str(err)})


def ask(gen: structgen.Generator, question: str) -> None:
    messages: list[dict] = [{"role": "user", "content": question}]
    reply = gen.tool_calls(TOOLS, messages, tool_choice="required", parallel_tool_calls=False, max_new_tokens=96)
    messages.append(reply.message)
    print(f"{question}\n  model calls: {reply.text}\n  ({reply.stats.forward_passes} forward passes for "
          f"{reply.stats.new_tokens} tokens)")
    for call in reply.message["tool_calls"]:
        result = run_call(call)
        print(f"  {call['function']['name']}({call['function']['arguments']}) -> {result}")
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
    messages.append({"role": "user", "content": "Now answer my question in one short sentence."})
    answer = gen.tool_calls(TOOLS, messages, tool_choice="none", max_new_tokens=96)
    print(f"  answer: {answer.message['content']}\n")


def main() -> None:
    torch.set_num_threads(2)
    gen = structgen.Generator()
    for question in QUESTIONS:
        try:
            ask(gen, question)
        except structgen.IncompleteGenerationError as err:
            print(f"  ran out of tokens: {err.partial_text!r}\n")


if __name__ == "__main__":
    main()
