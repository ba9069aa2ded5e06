from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    # The user keeps django.contrib.auth's integer key, so a database made with
    # Django's own User adopts this model with its tables and foreign keys unchanged.
    default_auto_field = "django.db.models.AutoField"
