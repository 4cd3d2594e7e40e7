"""Print kaipolicy's (plain path) audit job records for a scenario doc (JSON file), optionally filtered by action."""
import os, sys, json
TREE = os.environ.get("KAI_TREE", "/tmp/goref/head")
sys.path.insert(0, TREE); os.chdir(TREE)
exec(open('/tmp/goref/kai_outcome.py').read().split('def summarize')[0].split('sys.path.insert(0, TREE)\nos.chdir(TREE)\n')[1])
doc = json.load(open(sys.argv[1]))
actions = set(sys.argv[2].split(',')) if len(sys.argv) > 2 else None
with switched(False):
    res = outcome(doc)
for r in res[0][1]:
    if r.get('kind') == 'job' and (actions is None or r.get('action') in actions):
        print(r.get('cycle'), r.get('action'), r.get('job'), r.get('outcome'), r.get('victims', ''), (r.get('deniedBy') or {}).get('rule', ''))
