import pytest
from django.contrib.auth.models import AnonymousUser
from django.http import Http404

from submissions.selectors import submission_get_for_viewer, submission_list_for_owner
from tests.factories import EvaluationFactory, SubmissionFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner():
    return UserFactory()


@pytest.mark.parametrize("is_public", [True, False])
@pytest.mark.parametrize(
    ("viewer", "visible_if_private"),
    [("owner", True), ("staff", True), ("other", False), ("anonymous", False)],
)
def test_get_for_viewer_every_branch(owner, is_public, viewer, visible_if_private):
    submission = SubmissionFactory(owner=owner, is_public=is_public)
    user = {
        "owner": owner,
        "staff": UserFactory(is_staff=True),
        "other": UserFactory(),
        "anonymous": AnonymousUser(),
    }[viewer]

    if is_public or visible_if_private:
        assert submission_get_for_viewer(user=user, pk=submission.pk) == submission
    else:
        with pytest.raises(Http404):
            submission_get_for_viewer(user=user, pk=submission.pk)


@pytest.mark.parametrize("pk", [999_999, "abc", None])
def test_get_for_viewer_unknown_or_malformed_id_is_404(owner, pk):
    with pytest.raises(Http404):
        submission_get_for_viewer(user=owner, pk=pk)


def test_get_for_viewer_is_one_query(owner, django_assert_num_queries):
    submission = SubmissionFactory(owner=owner)
    with django_assert_num_queries(1):
        found = submission_get_for_viewer(user=owner, pk=submission.pk)
        assert found.task.slug and found.task_version.number and found.owner.username


def test_list_for_owner_only_the_owners_newest_first_with_latest_status(
    owner, django_assert_num_queries
):
    first = SubmissionFactory(owner=owner)
    EvaluationFactory(submission=first, status="worker_error")
    EvaluationFactory(submission=first, status="correct")
    second = SubmissionFactory(owner=owner, is_public=False)
    SubmissionFactory()  # someone else's

    with django_assert_num_queries(1):
        rows = [
            (s.pk, s.latest_status, s.task.slug) for s in submission_list_for_owner(owner=owner)
        ]

    assert [(pk, status) for pk, status, _ in rows] == [(second.pk, None), (first.pk, "correct")]
