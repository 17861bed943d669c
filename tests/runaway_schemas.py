"""Schemas that run away on the default model (a recursive tree, an expression tree, an email,
an unbounded string and an unbounded array), with prompts that lead the small model on: the
budget rule's test cases (tests/test_budget.py, and the vLLM tests)."""

TREE = {"$defs": {"node": {"type": "object", "properties": {
    "name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
    "required": ["name", "children"]}}, "$ref": "#/$defs/node"}
EXPR = {"$defs": {"expr": {"anyOf": [{"type": "number"}, {
    "type": "object", "properties": {"op": {"enum": ["+", "-", "*", "/"]}, "left": {"$ref": "#/$defs/expr"},
                                     "right": {"$ref": "#/$defs/expr"}}, "required": ["op", "left", "right"]}]}},
        "$ref": "#/$defs/expr"}
EMAIL = {"type": "object", "properties": {"name": {"type": "string"}, "email": {"type": "string", "format": "email"}},
         "required": ["name", "email"]}
SKU = {"type": "object", "properties": {"product": {"type": "string"}, "sku": {"type": "string"},
                                        "price": {"type": "number"}}, "required": ["product", "sku", "price"]}
TAGS = {"type": "object", "properties": {"title": {"type": "string"}, "tags": {
    "type": "array", "items": {"type": "string"}, "minItems": 2}}, "required": ["title", "tags"]}
RUNAWAYS = {  # the issue's runaways (a recursive tree, an expression tree, an email, an unbounded
    # string) and an unbounded array, with prompts that lead the small model on
    "tree": (TREE, "Describe the file tree of a small Python project as JSON."),
    "expression": (EXPR, "Write (1 + 2) * (3 - 4) / 5 as an expression tree."),
    "email": (EMAIL, "Extract the contact: Operation lead Maria Lopez, write to her by 2026-03-04."),
    "sku": (SKU, "Extract the product: the 2026 model of the trail runner, item 00417-22, costs 89.90."),
    "tags": (TAGS, "Tag this post: Ten things to see in Lisbon, from trams to tiles and pastries."),
}
