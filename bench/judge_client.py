"""Ask an LLM judge whether a kernel (or a proposed design) implements each design
property of its task, and post the answers to the portal as judge assessments.

    python bench/judge_client.py --portal http://localhost:8000 --token $PORTAL_TOKEN \\
        --endpoint http://localhost:8001/v1 --model judge-model --submission 42
    python bench/judge_client.py ... --run 7 --task row_softmax      # the run's proposal

The judge is any OpenAI-compatible `/v1/chat/completions` endpoint. It is given the
task's rubric (`GET /api/tasks/<slug>/rubric/`) and the code or the proposal, and must
answer one JSON object: {"assessments": [{"property", "value", "rationale",
"evidence"}]}. The answers go to `POST /api/assessments/` (the token's user needs the
permission `scoring.add_judge_assessment`). Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import urllib.error
import urllib.request
from typing import Any

SYSTEM = (
    "You grade GPU kernels against a rubric of design properties. For every property in "
    "the rubric, decide whether the text implements it (or, for a proposal, proposes it). "
    'Answer with one JSON object only: {"assessments": [{"property": key, "value": true or '
    'false, "rationale": one sentence, "evidence": [short quotes from the text]}]}.'
)


class JudgeError(Exception):
    pass


def _request(url: str, *, data: Any = None, headers: dict[str, str], timeout: float) -> Any:
    body = None if data is None else json.dumps(data).encode()
    request = urllib.request.Request(
        url,
        data=body,
        method="GET" if data is None else "POST",
        headers={"Content-Type": "application/json", "Accept": "application/json", **headers},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read().decode())
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")[:2000]
        raise JudgeError(f"{url}: HTTP {exc.code}: {detail}") from exc
    except (urllib.error.URLError, TimeoutError, ValueError) as exc:
        raise JudgeError(f"{url}: {exc}") from exc


def judge_prompt(*, rubric: dict[str, Any], text: str, what: str) -> list[dict[str, str]]:
    lines = [f"Task: {rubric['task']} — {rubric.get('title', '')}", rubric["implemented_means"]]
    for p in rubric["properties"]:
        needs = f" (needs {', '.join(p['depends_on'])})" if p["depends_on"] else ""
        lines.append(
            f"- {p['key']} [{p['level']}, weight {p['weight']}]{needs}: {p['title']}. "
            f"{p['implemented_when']}"
        )
    lines += ["", f"The {what} to grade:", "```", text, "```"]
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n".join(lines)}]


def judge_answer_parse(content: str, *, keys: set[str]) -> list[dict[str, Any]]:
    """The judge's assessments from its reply (a JSON object, possibly fenced)."""
    match = re.search(r"\{.*\}", content, flags=re.DOTALL)
    if match is None:
        raise JudgeError(f"the judge answered no JSON object: {content[:200]!r}")
    try:
        data = json.loads(match.group(0))
    except ValueError as exc:
        raise JudgeError(f"the judge's JSON does not parse: {exc}") from exc
    rows = data.get("assessments") if isinstance(data, dict) else None
    if not isinstance(rows, list):
        raise JudgeError("the judge's answer has no `assessments` list")
    answers = []
    for row in rows:
        if not isinstance(row, dict) or row.get("property") not in keys:
            continue  # a property the rubric does not have: ignored, never guessed
        if not isinstance(row.get("value"), bool):
            raise JudgeError(f"the judge gave no true/false for {row.get('property')!r}")
        evidence = row.get("evidence", [])
        answers.append(
            {
                "property": row["property"],
                "value": row["value"],
                "rationale": str(row.get("rationale") or "no rationale given").strip(),
                "evidence": evidence if isinstance(evidence, list) else [str(evidence)],
            }
        )
    return answers


def judge_run(
    *,
    portal: str,
    token: str,
    endpoint: str,
    model: str,
    api_key: str = "",
    submission: int | None = None,
    run: int | None = None,
    task: str | None = None,
    timeout: float = 120.0,
) -> dict[str, Any]:
    """Judge one submission's code (`submission`) or one run's proposal (`run`, `task`)
    and post the assessments; returns the portal's answer."""
    portal = portal.rstrip("/")
    auth = {"Authorization": f"Token {token}"}
    if submission is not None:
        found = _request(f"{portal}/api/submissions/{submission}/", headers=auth, timeout=timeout)
        slug, text, what = found["task"], found["source"], "kernel source"
        target: dict[str, Any] = {"kind": "implemented", "submission": submission}
    elif run is not None and task:
        found = _request(f"{portal}/api/runs/{run}/", headers=auth, timeout=timeout)
        row = next((r for r in found["tasks"] if r["task"] == task), None)
        if row is None or not (row["result"] or {}).get("proposal_html"):
            raise JudgeError(f"run #{run} has no proposal for {task}")
        slug, text, what = task, row["result"]["proposal_html"], "proposed design (HTML)"
        target = {"kind": "proposed", "run": run, "task": task}
    else:
        raise JudgeError("name a --submission, or a --run with a --task")
    rubric = _request(f"{portal}/api/tasks/{slug}/rubric/", headers=auth, timeout=timeout)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    reply = _request(
        f"{endpoint.rstrip('/')}/chat/completions",
        data={
            "model": model,
            "messages": judge_prompt(rubric=rubric, text=text, what=what),
            "temperature": 0,
        },
        headers=headers,
        timeout=timeout,
    )
    try:
        content = reply["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError) as exc:
        raise JudgeError(f"the endpoint's reply has no message: {str(reply)[:200]}") from exc
    keys = {p["key"] for p in rubric["properties"]}
    items = [
        {**target, **answer, "judge": model} for answer in judge_answer_parse(content, keys=keys)
    ]
    if not items:
        raise JudgeError("the judge assessed none of the rubric's properties")
    return _request(f"{portal}/api/assessments/", data=items, headers=auth, timeout=timeout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--portal", default=os.environ.get("D2K_PORTAL_URL", "http://localhost:8000")
    )
    parser.add_argument("--token", default=os.environ.get("D2K_PORTAL_TOKEN", ""))
    parser.add_argument(
        "--endpoint",
        default=os.environ.get("JUDGE_ENDPOINT", ""),
        help="OpenAI-compatible base URL, e.g. http://host:8001/v1",
    )
    parser.add_argument("--model", default=os.environ.get("JUDGE_MODEL", ""))
    parser.add_argument("--api-key", default=os.environ.get("JUDGE_API_KEY", ""))
    parser.add_argument("--submission", type=int)
    parser.add_argument("--run", type=int)
    parser.add_argument("--task")
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args(argv)
    if not (args.token and args.endpoint and args.model):
        parser.error("--token, --endpoint and --model are required (or their environment)")
    try:
        answer = judge_run(
            portal=args.portal,
            token=args.token,
            endpoint=args.endpoint,
            model=args.model,
            api_key=args.api_key,
            submission=args.submission,
            run=args.run,
            task=args.task,
            timeout=args.timeout,
        )
    except JudgeError as exc:
        print(f"judge_client: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
