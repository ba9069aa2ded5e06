"""Print a fresh API token for a user (an upload bot, a script)."""

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from accounts.models import Scope, User
from accounts.services import bot_user_create, token_reissue


class Command(BaseCommand):
    help = (
        "Revoke USERNAME's tokens named --name and print a new one, shown this once "
        "(--create makes the user first)."
    )

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument(
            "--create", action="store_true", help="Create the user (no password) if missing."
        )
        parser.add_argument("--name", default="command line", help="The token's name.")
        parser.add_argument(
            "--scope",
            action="append",
            choices=Scope.values,
            help="A scope for the token (repeatable; default: upload).",
        )

    def handle(self, *args, **options):
        user = User.objects.filter(username=options["username"]).first()
        if user is None:
            if not options["create"]:
                raise CommandError(
                    f"No user {options['username']!r}; pass --create to make one for a bot."
                )
            user = bot_user_create(username=options["username"])
        try:
            issued = token_reissue(
                user=user, name=options["name"], scopes=options["scope"] or [Scope.UPLOAD]
            )
        except ValidationError as exc:
            raise CommandError(" ".join(exc.messages)) from exc
        self.stdout.write(issued.key)
