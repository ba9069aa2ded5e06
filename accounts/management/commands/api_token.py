"""Print a fresh API token for a user (an upload bot, a script)."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from accounts.services import bot_user_create, token_regenerate


class Command(BaseCommand):
    help = "Revoke USERNAME's API token and print a new one (--create makes the user first)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument(
            "--create", action="store_true", help="Create the user (no password) if missing."
        )

    def handle(self, *args, **options):
        user = get_user_model().objects.filter(username=options["username"]).first()
        if user is None:
            if not options["create"]:
                raise CommandError(
                    f"No user {options['username']!r}; pass --create to make one for a bot."
                )
            user = bot_user_create(username=options["username"])
        self.stdout.write(token_regenerate(user=user).key)
