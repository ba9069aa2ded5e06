"""Adopt accounts.User on a database made while the portal used Django's own User."""

from django.core.management.base import BaseCommand
from django.db import connection, transaction
from django.db.migrations.recorder import MigrationRecorder


class Command(BaseCommand):
    help = (
        "Once, before `migrate`, on a database made with django.contrib.auth's User: record "
        "accounts.0001_initial (the same table) as applied and move the user's content type."
    )

    def handle(self, *args, **options):
        recorder = MigrationRecorder(connection)
        applied = recorder.applied_migrations()
        if ("accounts", "0001_initial") in applied:
            self.stdout.write("Nothing to do: accounts.User is adopted already.")
            return
        if "auth_user" not in connection.introspection.table_names():
            self.stdout.write("Nothing to adopt (no auth_user table): run `manage.py migrate`.")
            return
        with transaction.atomic(), connection.cursor() as cursor:
            recorder.record_applied("accounts", "0001_initial")
            cursor.execute(
                "UPDATE django_content_type SET app_label = 'accounts' "
                "WHERE app_label = 'auth' AND model = 'user' AND NOT EXISTS "
                "(SELECT 1 FROM django_content_type WHERE app_label = 'accounts' "
                "AND model = 'user')"
            )
        self.stdout.write("accounts.User adopts auth_user; now run `manage.py migrate`.")
