"""An invalid filter answers 400 in the format asked for: JSON with `format=json`."""

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("page", ["leaderboard", "paired", "matrix"])
def test_an_invalid_filter_with_format_json_is_a_json_400(client, page):
    response = client.get(reverse(f"leaderboard:{page}"), {"since": "yesterday", "format": "json"})
    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    assert "since" in response.json()["detail"]


def test_with_format_csv_it_is_one_line_of_text_and_without_the_page(client):
    url = reverse("leaderboard:leaderboard")
    csv = client.get(url, {"since": "yesterday", "format": "csv"})
    assert csv.status_code == 400 and csv["Content-Type"].startswith("text/plain")
    assert csv.content.decode().startswith("since:")
    page = client.get(url, {"since": "yesterday"})
    assert page.status_code == 400 and page["Content-Type"].startswith("text/html")
