from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

pytestmark = pytest.mark.django_db


def test_ensure_admin_creates_one_administrator_and_prints_its_password():
    out = StringIO()
    call_command("ensure_admin", stdout=out)
    password = out.getvalue().rsplit(": ", 1)[1].strip()
    admin = get_user_model().objects.get(username="admin")
    assert admin.is_superuser and admin.check_password(password)

    again = StringIO()
    call_command("ensure_admin", stdout=again)
    assert "exists already" in again.getvalue()
    assert get_user_model().objects.filter(is_superuser=True).count() == 1
