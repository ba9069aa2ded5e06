"""Create the first administrator on a fresh install and print how to sign in."""

import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create an 'admin' superuser with a random password if no superuser exists."

    def handle(self, *args, **options):
        users = get_user_model().objects
        if users.filter(is_superuser=True).exists():
            self.stdout.write("An administrator exists already; sign in with its password.")
            return
        password = secrets.token_urlsafe(12)
        users.create_superuser("admin", email="", password=password)
        self.stdout.write(f"Created administrator 'admin' with password: {password}")
