#!/usr/bin/env python3
"""Convert public tool-use data sets into ardx relevance sets.

Offline tuning only (docs/decisions.md, issue 19): the sets are never
committed and never read in CI. Bring the three public repositories below
(for instance with the search tool's fetch), copy the files named here into
$RELSETS_SRC (default /tmp/relsets/src/), run this script, then:

  ARDX_RELEVANCE_SETS=/tmp/relsets/all.json go test ./index -run 'TestRelevanceSets$' -v

Each set is shaped like a registry of API operations: per operation an
entry whose display name is "Tool: operation name", whose description ends
with "Parameters: ...", with one capability (the operation name) and one
tag (the category); requests are labelled with the operations they use.

Inputs:
  toolalpaca_eval_real.json, toolalpaca_eval_simulated.json  (tangqiaoyu/ToolAlpaca data/)
  restgpt_{tmdb,spotify}.json, restgpt_{tmdb,spotify}_oas.json  (Yifan-Song793/RestGPT datasets/, specs/)
  apibank/{level-1-api,level-3,lv3-train}.json  (AlibabaResearch/DAMO-ConvAI api-bank, commit 1d76900)
  stb/G{1_category,1_instruction,1_tool,2_category,2_instruction,3_instruction}.json
      (THUNLP-MT/StableToolBench solvable_queries/test_instruction/: ToolBench's
      RapidAPI requests; every operation of a request's api_list is an entry,
      the relevant ones are labelled; "stb-relevant" keeps only the labelled)
  sealtools/{tool,test_in_domain,test_out_domain}.jsonl
      (fairyshine/Seal-Tools Seal-Tools_Dataset/, commit ce753ec)
  bfcl/{<category>,answer_<category>}.json for each category in BFCL
      (ShishirPatil/gorilla berkeley-function-call-leaderboard/bfcl_eval/data/
      BFCL_v4_<category>.json and possible_answer/BFCL_v4_<category>.json,
      commit 6ea5797)
Outputs: /tmp/relsets/<name>.json (a one-set array) and /tmp/relsets/all.json.
"""
import ast
import json
import os
import re
from collections import OrderedDict, defaultdict

SRC = os.environ.get("RELSETS_SRC", "/tmp/relsets/src")
OUT = os.environ.get("RELSETS_OUT", "/tmp/relsets")


def slug(s):
    return re.sub(r"[^a-z0-9]+", "-", s.lower()).strip("-")


def words(name):
    """getWeatherForecast / get_weather_forecast -> 'Get weather forecast'."""
    s = re.sub(r"[_\-./]+", " ", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", s)
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1 \2", s)
    parts = s.split()
    out = []
    for i, p in enumerate(parts):
        if p.isupper() and len(p) > 1:  # keep acronyms (IP, US, API)
            out.append(p)
        else:
            out.append(p.lower())
    txt = " ".join(out)
    return txt[:1].upper() + txt[1:]


def clean(s):
    s = s or ""
    s = re.split(r"#{2,} ", s)[0]  # TMDB: "#### Recent Changes" tables
    s = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", s)  # markdown links
    s = s.replace("`", "")
    s = re.sub(r"<[^>]+>", " ", s)
    s = re.sub(r"\s+", " ", s).strip()
    return s


def mkdoc(tool, op_name, op_key, desc, params, category, standalone=False):
    """An entry for operation op_name of tool; a standalone operation (no
    tool of its own) is its own tool and its display name is op_name."""
    ts = slug(tool)
    desc = clean(desc).rstrip(".")
    if params:
        desc = (desc + ". " if desc else "") + "Parameters: " + ", ".join(params)
    elif desc:
        desc += "."
    return {
        "id": "urn:ai:%s.example:%s:%s" % (ts, ts, slug(words(op_key))),
        "displayName": op_name if standalone else "%s: %s" % (tool, op_name),
        "description": desc,
        "capabilities": [op_name],
        "tags": [category] if category else [],
    }


def finish(name, docs, queries):
    ids = set()
    uniq = []
    for d in docs:
        if d["id"] in ids:
            continue
        ids.add(d["id"])
        uniq.append(d)
    seen = set()
    qs = []
    dropped = 0
    for text, rel in queries:
        text = clean(text)
        rel = list(OrderedDict.fromkeys(rel))
        if not text or not rel:
            dropped += 1
            continue
        if any(r not in ids for r in rel):
            dropped += 1
            continue
        key = text.lower()
        if key in seen:
            continue
        seen.add(key)
        qs.append({"text": text, "relevant": rel})
    print("%s: %d docs, %d queries (%d dropped), %.2f relevant/query" % (
        name, len(uniq), len(qs), dropped, sum(len(q["relevant"]) for q in qs) / max(len(qs), 1)))
    return {"name": name, "docs": uniq, "queries": qs}


# ---------------------------------------------------------------- ToolAlpaca
def toolalpaca():
    docs, queries = [], []
    for f in ("toolalpaca_eval_real.json", "toolalpaca_eval_simulated.json"):
        for t in json.load(open(os.path.join(SRC, f))):
            tool = t["Name"].strip()
            ids = {}
            for fn, fd in t["Function_Description"].items():
                if fn == "components":
                    continue
                first, _, rest = ("\n" + fd).partition("\nParameters:")
                params = []
                m = re.match(r"\s*(\{.*?\})\s*\n", rest + "\n", re.S)
                if m:
                    try:
                        params = list(json.loads(m.group(1)).keys())
                    except Exception:
                        params = re.findall(r'"([^"]+)":', m.group(1))
                d = mkdoc(tool, words(fn), fn, first, params, t["Category"])
                ids[fn] = d["id"]
                docs.append(d)
            for inst, gold in zip(t["Instructions"], t["Golden_Answers"]):
                rel = []
                for a in gold:
                    name = a["Action"].replace("[Optional]", "").strip()
                    if name == "getDetails":  # the retrieval pseudo-tool
                        continue
                    rel.append(ids.get(name, "missing:" + name))
                queries.append((inst, rel))
    return finish("toolalpaca", docs, queries)


# ---------------------------------------------------------------- RestBench
FIX = {
    "GET /person/{movie_id}/movie_credits": "GET /person/{person_id}/movie_credits",
    "GET /track/{id}": "GET /tracks/{id}",
}


def restbench():
    docs, queries = [], []
    for api, tool, category in (("tmdb", "TMDB", "Movies"), ("spotify", "Spotify", "Music")):
        spec = json.load(open(os.path.join(SRC, "restgpt_%s_oas.json" % api)))
        ops = []
        for path, item in spec["paths"].items():
            shared = item.get("parameters", [])
            for method, op in item.items():
                if method not in ("get", "post", "put", "delete", "patch"):
                    continue
                params = [p.get("name") for p in shared + op.get("parameters", []) if "name" in p]
                body = op.get("requestBody", {}).get("content", {})
                for ct in body.values():
                    params += list(ct.get("schema", {}).get("properties", {}).keys())
                params = list(OrderedDict.fromkeys(p for p in params if p))
                ops.append((method.upper() + " " + path, op, params))
        count = defaultdict(int)
        for _, op, _ in ops:
            count[op.get("summary", "").strip()] += 1
        ids = {}
        for key, op, params in ops:
            summary = op.get("summary", "").strip() or words(op.get("operationId", key))
            if count[summary] > 1:  # e.g. TMDB "Get Details" for movie, tv, person...
                sw = set(summary.lower().split())
                seg = [x.replace("_", " ") for x in key.split(" ", 1)[1].split("/") if x and not x.startswith("{")]
                seg = [x for x in seg if not set(x.split()) <= sw and x.rstrip("s") + "s" not in sw and x + "s" not in sw]
                summary = "%s (%s)" % (summary, " ".join(seg))
            desc = op.get("description", "") or ""
            d = mkdoc(tool, summary, summary, desc, params, category)
            ids[key] = d["id"]
            docs.append(d)
        for q in json.load(open(os.path.join(SRC, "restgpt_%s.json" % api))):
            rel = []
            for s in q["solution"]:
                s = re.sub(r"\s+", " ", s.strip())
                s = FIX.get(s, s)
                rel.append(ids.get(s, "missing:" + s))
            queries.append((q["query"], rel))
    return finish("restbench", docs, queries)


# ---------------------------------------------------------------- API-Bank
def apibank():
    apis = OrderedDict()  # name -> (description, params)

    def add_api(d):
        if not isinstance(d, dict) or "name" not in d:
            return
        n = d["name"]
        if n == "ToolSearcher" or n in apis:
            return
        params = d.get("input_parameters") or d.get("parameters") or {}
        apis[n] = (d.get("description", ""), list(params.keys()) if isinstance(params, dict) else [])

    queries = []
    call = re.compile(r"API-Request: \[([A-Za-z_][A-Za-z0-9_]*)\(")

    # Level-3 training data: one user utterance, ToolSearcher results + calls.
    by_utt = OrderedDict()
    for x in json.load(open(os.path.join(SRC, "apibank/lv3-train.json"))):
        inp = x["input"]
        i = inp.index("\nUser: ")
        body = inp[i + 7:]
        utt, _, hist = body.partition("\n")
        utt = re.sub(r"TIME: .*$", "", utt).strip()
        names = by_utt.setdefault(utt, [])
        for line in (hist + "\n" + x["output"]).split("\n"):
            m = call.search(line)
            if not m:
                continue
            if m.group(1) == "ToolSearcher":
                _, sep, res = line.partition(")]->")
                if sep:
                    try:
                        add_api(ast.literal_eval(res.strip()))
                    except Exception:
                        pass
            else:
                names.append(m.group(1))
    for utt, names in by_utt.items():
        queries.append((utt, names))

    # Level-3 test data: requirement -> APIs called.
    for x in json.load(open(os.path.join(SRC, "apibank/level-3.json"))):
        names = []
        for a in x["apis"]:
            if a["api_name"] == "ToolSearcher":
                out = a.get("output", {}).get("output")
                for o in out if isinstance(out, list) else [out]:
                    add_api(o)
            else:
                names.append(a["api_name"])
        queries.append((x["requirement"], names))

    # Level-1/2 test data: dialogues; a file's user turns -> the APIs it calls.
    files = OrderedDict()
    for x in json.load(open(os.path.join(SRC, "apibank/level-1-api.json"))):
        for line in x["instruction"].split("\n"):
            line = line.strip()
            if line.startswith("{") and '"name"' in line:
                try:
                    add_api(json.loads(line))
                except Exception:
                    pass
        users = [l[6:].strip() for l in x["input"].split("\n") if l.startswith("User: ")]
        m = call.search(x["expected_output"])
        f = files.setdefault(x["file"], {"users": [], "names": []})
        if len(users) > len(f["users"]):
            f["users"] = users
        if m:
            f["names"].append(m.group(1))
    for f in files.values():
        queries.append((" ".join(f["users"]), f["names"]))

    docs = []
    ids = {}
    for n, (desc, params) in apis.items():
        d = mkdoc(n, words(n), n, desc, params, "API-Bank")
        ids[n] = d["id"]
        docs.append(d)
    queries = [(t, [ids.get(n, "missing:" + n) for n in names]) for t, names in queries]
    return finish("apibank", docs, queries)


# ---------------------------------------------------------- StableToolBench
STB = ("G1_category", "G1_instruction", "G1_tool", "G2_category", "G2_instruction", "G3_instruction")


def stb():
    docs, queries, ids, used = [], [], {}, set()
    for f in STB:
        for q in json.load(open(os.path.join(SRC, "stb", f + ".json"))):
            for a in q["api_list"]:
                key = (a["tool_name"], a["api_name"])
                if key in ids:
                    continue
                params = [p["name"] for p in a.get("required_parameters", []) + a.get("optional_parameters", [])]
                d = mkdoc(a["tool_name"].strip(), a["api_name"].strip(), a["tool_name"] + " " + a["api_name"],
                          a.get("api_description") or "", params, a.get("category_name", ""))
                ids[key] = d["id"]
                docs.append(d)
            rel = [ids.get((t, n), "missing:" + n) for t, n in q["relevant APIs"]]
            used.update(rel)
            queries.append((q["query"], rel))
    return [finish("stb", docs, queries),
            finish("stb-relevant", [d for d in docs if d["id"] in used], queries)]


# ---------------------------------------------------------------- Seal-Tools
def sealtools():
    """Seal-Tools (fairyshine/Seal-Tools, Apache 2.0): 4,076 self-contained
    APIs written by an LLM across many fields, and requests of one to six
    calls written by it too. An API has no tool of its own, so its display
    name is its name in words and its publisher stands alone; the tag is the
    field's top level ("Chemical Engineering" of "Chemical
    Engineering/Forensic engineering")."""
    docs, ids = [], {}
    for line in open(os.path.join(SRC, "sealtools", "tool.jsonl")):
        a = json.loads(line)
        name = a["api_name"].strip()
        if name in ids:
            continue
        d = mkdoc(words(name), words(name), name, a.get("api_description") or "",
                  list(a.get("parameters") or {}), a.get("field", "").split("/")[0], standalone=True)
        ids[name] = d["id"]
        docs.append(d)
    queries = []
    for f in ("test_in_domain", "test_out_domain"):
        for line in open(os.path.join(SRC, "sealtools", f + ".jsonl")):
            q = json.loads(line)
            queries.append((q["query"], [ids.get(c["api"], "missing:" + c["api"]) for c in q["calling"]]))
    return finish("sealtools", docs, queries)


# ---------------------------------------------------------------------- BFCL
BFCL = ("simple_python", "multiple", "parallel", "parallel_multiple", "live_simple",
        "live_multiple", "live_parallel", "live_parallel_multiple")


def bfcl():
    """The Berkeley Function Calling Leaderboard's single-turn Python
    categories (ShishirPatil/gorilla, Apache 2.0): every question comes
    with a few functions, the called ones labelled; all questions'
    functions pooled by name make the registry (the first description of a
    name kept: the live categories repeat one function list over many
    questions with small rewordings). "Tool: operation" from a dotted name
    ("math_toolkit.sum_of_multiples"), else the name in words. No
    categories."""
    docs, ids, queries, used = [], {}, [], set()
    for f in BFCL:
        answers = {}
        for line in open(os.path.join(SRC, "bfcl", "answer_" + f + ".json")):
            a = json.loads(line)
            answers[a["id"]] = [n for g in a["ground_truth"] for n in g]
        for line in open(os.path.join(SRC, "bfcl", f + ".json")):
            q = json.loads(line)
            for fn in q["function"]:
                if fn["name"] in ids:
                    continue
                tool, _, op = fn["name"].rpartition(".")
                d = mkdoc(words(tool) if tool else words(op), words(op), fn["name"], fn.get("description", ""),
                          list((fn.get("parameters") or {}).get("properties") or {}), "", standalone=not tool)
                base, k = d["id"], 2
                while d["id"] in used:  # names that differ only in case or punctuation
                    d["id"] = "%s-%d" % (base, k)
                    k += 1
                used.add(d["id"])
                ids[fn["name"]] = d["id"]
                docs.append(d)
            users = [m["content"] for turn in q["question"] for m in turn if m["role"] == "user"]
            if users:
                queries.append((users[-1], [ids.get(n, "missing:" + n) for n in answers.get(q["id"], [])]))
    return finish("bfcl", docs, queries)


def main():
    sets = [toolalpaca(), restbench(), apibank()]
    # All three pooled: more docs and cross-domain distractors, closer to
    # the held-out set's size (464 docs, 1,877 queries).
    sets.append(finish("pooled", [d for s in sets for d in s["docs"]],
                       [(q["text"], q["relevant"]) for s in sets for q in s["queries"]]))
    sets += stb()
    sets.append(sealtools())
    sets.append(bfcl())
    os.makedirs(OUT, exist_ok=True)
    for s in sets:
        with open(os.path.join(OUT, s["name"] + ".json"), "w") as f:
            json.dump([s], f, indent=1, ensure_ascii=False)
    with open(os.path.join(OUT, "all.json"), "w") as f:
        json.dump(sets, f, indent=1, ensure_ascii=False)


if __name__ == "__main__":
    main()
