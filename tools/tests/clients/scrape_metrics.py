"""Scrapes a node's /metrics and parses it with prometheus_client's OpenMetrics parser (the
format the node serves, docs/operations.md "Metrics"). Prints one JSON object: every family's
type and its samples as [name, labels, value]. Exits non-zero when the scrape or the parse
fails: the parser raises on any line the format does not allow.

usage: scrape_metrics.py http://127.0.0.1:PORT/metrics
"""
import json
import math
import sys
import urllib.request

from prometheus_client.openmetrics.parser import text_string_to_metric_families


def main():
    url = sys.argv[1]
    with urllib.request.urlopen(url, timeout=10) as response:
        if response.status != 200:
            sys.exit(f"{url}: HTTP {response.status}")
        content_type = response.headers.get("Content-Type", "")
        text = response.read().decode("utf-8")
    families = {}
    for family in text_string_to_metric_families(text):
        samples = []
        for sample in family.samples:
            value = sample.value
            if math.isinf(value):
                value = "+Inf" if value > 0 else "-Inf"
            samples.append([sample.name, dict(sample.labels), value])
        families[family.name] = {"type": family.type, "unit": family.unit, "samples": samples}
    print(json.dumps({"content_type": content_type, "families": families}))


if __name__ == "__main__":
    main()
