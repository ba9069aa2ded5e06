"""The OpenAPI schema says what the API answers: paginated lists are pages, not arrays."""

import pytest

from tests.factories import RunFactory, SubmissionFactory, UserFactory, token_client

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("path", "component"),
    [("/api/runs/", "PaginatedRunList"), ("/api/submissions/", "PaginatedSubmissionList")],
)
def test_a_paginated_list_is_documented_as_the_page_it_answers(client, path, component):
    schema = client.get("/api/schema/?format=json").json()
    response = schema["paths"][path]["get"]["responses"]["200"]
    ref = response["content"]["application/json"]["schema"]["$ref"]
    assert ref == f"#/components/schemas/{component}"
    documented = set(schema["components"]["schemas"][component]["properties"])

    owner = UserFactory()
    RunFactory(owner=owner, is_public=True)
    SubmissionFactory(owner=owner)
    answered = token_client(owner).get(path).json()
    assert set(answered) == documented == {"count", "next", "previous", "results"}
