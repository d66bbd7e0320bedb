#!/usr/bin/env python3
"""The baseline: Python's jsonschema (Draft202012Validator) on the same schema and documents.

Prints the median wall-clock time of parse (json.loads) + validate (iter_errors), and of
validate alone, over repeated runs, in the same shape as the Swift benchmark's names.
"""
import json, os, statistics, sys, time
import jsonschema

here = os.path.dirname(os.path.abspath(__file__))
fixtures = os.path.join(here, "Fixtures")
schema = json.load(open(os.path.join(fixtures, "schema.json")))
validator = jsonschema.Draft202012Validator(schema)

def median_time(function, seconds=5.0, max_runs=2000):
    samples, deadline = [], time.perf_counter() + seconds
    while len(samples) < max_runs and (time.perf_counter() < deadline or len(samples) < 5):
        start = time.perf_counter()
        function()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples), len(samples)

print(f"python {sys.version.split()[0]}, jsonschema {__import__('importlib.metadata').metadata.version('jsonschema')}")
for name, file in [("10 KB, 100 settings", "small.json"), ("1 MB", "large.json")]:
    text = open(os.path.join(fixtures, file), "rb").read()
    document = json.loads(text)
    assert not list(validator.iter_errors(document)), "fixture must be valid"
    for label, function in [
        (f"parse + validate {name}", lambda: list(validator.iter_errors(json.loads(text)))),
        (f"validate {name}", lambda: list(validator.iter_errors(document))),
    ]:
        median, runs = median_time(function)
        print(f"{label}: median {median * 1e6:.0f} us over {runs} runs, {len(text) / median / 1e6:.1f} MB/s")
