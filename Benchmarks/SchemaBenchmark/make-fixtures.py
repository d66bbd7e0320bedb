#!/usr/bin/env python3
"""Writes the benchmark's schema and documents into Fixtures/ (deterministic).

schema.json  – a settings schema with 100 settings of every common kind (strings with patterns
               and lengths, enums, bounded integers and numbers, booleans, arrays of strings, and
               one array of objects, `playlist`, whose items have their own schema)
small.json   – a values document for it, about 10 KB
large.json   – the same with a 1 MB playlist (the large-document case)
"""
import json, os, random

random.seed(42)
here = os.path.dirname(os.path.abspath(__file__))
out = os.path.join(here, "Fixtures")
os.makedirs(out, exist_ok=True)

properties, values = {}, {}
for i in range(99):
    kind = i % 6
    key = f"setting{i:02d}"
    if kind == 0:
        properties[key] = {"type": "string", "minLength": 1, "maxLength": 200, "pattern": "^[a-z0-9-]+$", "default": "a"}
        values[key] = "value-" + "x" * random.randint(120, 190)
    elif kind == 1:
        properties[key] = {"enum": ["off", "low", "medium", "high"], "default": "off"}
        values[key] = random.choice(["off", "low", "medium", "high"])
    elif kind == 2:
        properties[key] = {"type": "integer", "minimum": 0, "maximum": 100000, "default": 1}
        values[key] = random.randint(0, 100000)
    elif kind == 3:
        properties[key] = {"type": "number", "exclusiveMinimum": 0, "maximum": 1, "multipleOf": 0.125, "default": 0.5}
        # Exact binary fractions: Python's jsonschema wrongly rejects e.g. 0.954 as a multiple
        # of 0.001 (it divides in floating point), and the baseline must accept the fixtures.
        values[key] = random.randint(1, 8) * 0.125
    elif kind == 4:
        properties[key] = {"type": "boolean", "default": False, "x-writable": True}
        values[key] = random.choice([True, False])
    else:
        properties[key] = {"type": "array", "items": {"type": "string", "maxLength": 64}, "maxItems": 32, "uniqueItems": True}
        values[key] = [f"tag{j}-" + "y" * random.randint(20, 50) for j in range(random.randint(4, 8))]

properties["playlist"] = {"type": "array", "items": {"$ref": "#/$defs/item"}}
schema = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": properties,
    "required": ["setting00", "setting01"],
    "additionalProperties": False,
    "$defs": {
        "item": {
            "type": "object",
            "properties": {
                "content": {"type": "string", "pattern": "^https://"},
                "cache": {"type": "boolean"},
                "duration": {"type": "integer", "minimum": 1, "maximum": 3600},
                "title": {"type": "string", "maxLength": 120},
            },
            "required": ["content", "duration"],
            "additionalProperties": False,
        }
    },
}

def item(n):
    return {"content": f"https://cdn.example.com/media/{n:06d}/" + "z" * random.randint(10, 40) + ".mp4",
            "cache": n % 2 == 0, "duration": random.randint(1, 3600), "title": f"Item {n}"}

small = dict(values, playlist=[item(n) for n in range(12)])
large = dict(values, playlist=[])
n = 0
while len(json.dumps(large)) < 1_000_000:
    large["playlist"].extend(item(n + k) for k in range(100))
    n += 100

for name, doc in [("schema.json", schema), ("small.json", small), ("large.json", large)]:
    with open(os.path.join(out, name), "w") as f:
        json.dump(doc, f, indent=1 if name == "schema.json" else None)
for name in ["small.json", "large.json"]:
    print(name, os.path.getsize(os.path.join(out, name)), "bytes")
