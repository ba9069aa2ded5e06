from django.contrib import admin
from django.contrib.auth.admin import UserAdmin as DjangoUserAdmin
from rest_framework_api_key.models import APIKey

from accounts.models import ApiToken, User

# The library's own key model is unused: the portal's tokens are ApiToken.
admin.site.unregister(APIKey)


@admin.register(User)
class UserAdmin(DjangoUserAdmin):
    fieldsets = (
        *(DjangoUserAdmin.fieldsets or ()),
        ("Portal", {"fields": ("affiliation",)}),
    )
    list_display = ("username", "email", "affiliation", "is_staff", "date_joined")
    search_fields = ("username", "email", "affiliation")


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("name", "user", "prefix", "scopes", "created", "last_used_at", "revoked")
    list_filter = ("revoked",)
    search_fields = ("name", "prefix", "user__username")
    readonly_fields = ("user", "prefix", "name", "scopes", "created", "last_used_at")
    fields = ("revoked", *readonly_fields)

    def has_add_permission(self, request) -> bool:
        return False
