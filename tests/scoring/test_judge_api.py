"""The judge's doors: the rubric, `POST /api/assessments/`, and bench/judge_client.py
against a fake OpenAI-compatible endpoint and the live test server."""

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from django.contrib.auth.models import Permission
from rest_framework.test import APIClient

from scoring.models import Assessment, RunScore
from tests.bench_scripts import bench_script
from tests.factories import RunFactory, SubmissionFactory, UserFactory, api_token_key
from tests.scoring.conftest import SOURCE_GOOD

judge_client = bench_script("judge_client")


def judge_user():
    user = UserFactory(username="judge-bot")
    user.user_permissions.add(Permission.objects.get(codename="add_judge_assessment"))
    return user


def _scopes(user):
    from accounts.auth import scope_allowed

    return ("upload", "judge") if scope_allowed(user=user, scope="judge") else ("upload",)


def client_for(user):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_key(user, scopes=_scopes(user))}")
    return client


@pytest.mark.django_db
def test_the_rubric_lists_every_property_with_what_counts(client, scored_task):
    body = client.get("/api/tasks/softmax/rubric/").json()
    assert [p["key"] for p in body["properties"]] == ["max", "online", "single_pass", "exp2"]
    online = body["properties"][1]
    assert online["level"] == "L1" and online["weight"] == 2.0 and online["depends_on"] == ["max"]
    assert online["implemented_when"] and body["implemented_means"]
    assert body["properties"][2]["counters"] == {"kind": "traffic", "max_ratio": 1.3}
    # single_pass has a counter rule but no detector: a machine judges it only on the GPU.
    assert [p["machine_evidence"] for p in body["properties"]] == [
        "source",
        "source",
        "counter",
        "source",
    ]
    scored_task.properties.filter(key="single_pass").update(counters=None)
    body = client.get("/api/tasks/softmax/rubric/").json()
    assert body["properties"][2]["machine_evidence"] is None  # for a judge or an admin
    assert client.get("/api/tasks/nope/rubric/").status_code == 404


@pytest.mark.django_db
def test_posting_assessments_needs_the_judge_permission(scored_task):
    submission = SubmissionFactory(task=scored_task, task_version=scored_task.current_version)
    item = {
        "kind": "implemented",
        "submission": submission.pk,
        "property": "max",
        "value": True,
        "rationale": "r",
    }
    assert APIClient().post("/api/assessments/", [item], format="json").status_code == 401
    plain = client_for(UserFactory())
    response = plain.post("/api/assessments/", [item], format="json")
    assert response.status_code == 403 and "add_judge_assessment" in response.json()["detail"]
    judge = client_for(judge_user())
    response = judge.post("/api/assessments/", [item], format="json")
    assert response.status_code == 201 and response.json()["stored"] == 1
    assert Assessment.objects.get(source="judge").who.username == "judge-bot"


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "index", "fragment"),
    [
        ({"not": "a list"}, None, "non-empty JSON list"),
        ([], None, "non-empty JSON list"),
        ([{"kind": "implemented"}, "x"], 0, "`value` must be true or false"),
        ([{"kind": "weird", "property": "max", "value": True, "rationale": "r"}], 0, "`kind`"),
    ],
)
def test_a_bad_batch_is_a_400_with_per_item_errors_and_nothing_stored(
    scored_task, body, index, fragment
):
    response = client_for(judge_user()).post("/api/assessments/", body, format="json")
    assert response.status_code == 400
    errors = response.json()["errors"]
    assert errors[0]["index"] == index and any(fragment in e for e in errors[0]["errors"])
    assert response.json()["detail"].startswith("Nothing was stored")
    assert not Assessment.objects.exists()


@pytest.mark.django_db
def test_malformed_json_is_a_400_with_a_detail():
    response = client_for(judge_user()).post(
        "/api/assessments/", "[{", content_type="application/json"
    )
    assert response.status_code == 400 and "detail" in response.json()


class FakeJudge(BaseHTTPRequestHandler):
    """An OpenAI-compatible endpoint whose model says: max yes, online no, exp2 yes."""

    requests: list = []

    def do_POST(self):
        length = int(self.headers["Content-Length"])
        FakeJudge.requests.append(json.loads(self.rfile.read(length)))
        answer = {
            "assessments": [
                {"property": "max", "value": True, "rationale": "tl.max", "evidence": ["tl.max"]},
                {"property": "online", "value": False, "rationale": "no running sum"},
                {"property": "exp2", "value": True, "rationale": "exp2 with LOG2E"},
                {"property": "invented", "value": True, "rationale": "not in the rubric"},
            ]
        }
        content = f"Here you are:\n```json\n{json.dumps(answer)}\n```"
        reply = {"choices": [{"message": {"role": "assistant", "content": content}}]}
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def fake_judge():
    server = HTTPServer(("127.0.0.1", 0), FakeJudge)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    FakeJudge.requests = []
    yield f"http://127.0.0.1:{server.server_port}/v1"
    server.shutdown()


@pytest.mark.django_db(transaction=True)
def test_the_judge_client_grades_a_kernel_and_posts_to_the_live_server(
    live_server, fake_judge, scored_task, finish
):
    run = RunFactory()
    submission = SubmissionFactory(
        task=scored_task, task_version=scored_task.current_version, run=run, source=SOURCE_GOOD
    )
    token = api_token_key(judge_user(), scopes=("upload", "judge"))
    answer = judge_client.judge_run(
        portal=live_server.url,
        token=token,
        endpoint=fake_judge,
        model="fake-judge-1",
        submission=submission.pk,
    )
    assert answer["stored"] == 3
    prompt = FakeJudge.requests[0]["messages"][1]["content"]
    assert "online [L1, weight 2.0] (needs max)" in prompt and "tl.exp2" in prompt
    stored = {a.property.key: (a.value, a.judge) for a in Assessment.objects.filter(source="judge")}
    assert stored == {
        "max": (True, "fake-judge-1"),
        "online": (False, "fake-judge-1"),
        "exp2": (True, "fake-judge-1"),
    }
    # The run's implementation score follows once the kernel is correct: max 1 + exp2 1 of 6
    assert RunScore.objects.get(run=run).implementation["combined"] == 0.0  # not evaluated yet
    finish(submission)
    assert RunScore.objects.get(run=run).implementation["combined"] == pytest.approx(100 * 2 / 6)


def test_the_judge_client_refuses_an_answer_without_json():
    with pytest.raises(judge_client.JudgeError, match="no JSON object"):
        judge_client.judge_answer_parse("I think it is fine.", keys={"max"})
    with pytest.raises(judge_client.JudgeError, match="true/false"):
        judge_client.judge_answer_parse(
            '{"assessments": [{"property": "max", "value": "yes"}]}', keys={"max"}
        )
